// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/send"
	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/translate"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
)

// The size pack computes must be the body the SDK sends, byte for byte:
// the server measures the decompressed body.
func TestPackSizeIsTheSerializedSize(t *testing.T) {
	isolateAWS(t)
	server, err := cloudwatchtest.Start("127.0.0.1:0")
	require.NoError(t, err)
	defer server.Close()
	cfg := testConfig()
	cfg.Region = "eu-west-1"
	awsCfg, err := send.LoadAWSConfig(context.Background(), awsSourceOf(cfg))
	require.NoError(t, err)
	putter := send.NewCloudWatchPutter(awsCfg, server.Endpoint())

	now := pcommon.NewTimestampFromTime(time.Now())
	values := make([]float64, 150)
	counts := make([]float64, 150)
	for i := range values {
		values[i], counts[i] = float64(i), 1
	}
	cases := [][]translate.Datum{
		{{Name: "m", Kind: translate.KindValue, Timestamp: now, Resolution: 60, Unit: translate.UnitIDOf(types.StandardUnitNone)}},
		{{Name: "m", Kind: translate.KindValue, Timestamp: now, Resolution: 1}},
		{{Name: strings.Repeat("n", 23), Kind: translate.KindValue, Timestamp: now, Resolution: 60, Unit: translate.UnitIDOf(types.StandardUnitBytesSecond)}},
		{{Name: strings.Repeat("n", 24), Kind: translate.KindValue, Timestamp: now, Resolution: 60}},
		{{Name: strings.Repeat("n", 255), Kind: translate.KindValue, Timestamp: now, Resolution: 60}},
		{{Name: "s", Kind: translate.KindStatistics, Floats: []float64{1, 2, 2, 2}, Timestamp: now, Resolution: 60, Unit: translate.UnitIDOf(types.StandardUnitSeconds)}},
		{{Name: "v", Kind: translate.KindValues, Floats: append(values, counts...), Timestamp: now, Resolution: 60}},
		{{Name: "d", Kind: translate.KindValue, Timestamp: now, Resolution: 60, Dims: []translate.Dimension{
			{Name: "a", Value: "b"}, {Name: strings.Repeat("k", 255), Value: strings.Repeat("v", 1024)}, {Name: strings.Repeat("k", 24), Value: strings.Repeat("v", 256)},
		}}},
	}
	for i, ds := range cases {
		for j := range ds {
			ds[j].Point = int32(j)
		}
		server.Reset()
		packed, reqs := ds, translate.Pack(ds, "Test/NS", nil)
		require.Len(t, reqs, 1)
		require.NoError(t, putter.Put(context.Background(), "Test/NS", packed))
		got := server.Requests()
		require.Len(t, got, 1)
		assert.Equal(t, got[0].BodyBytes, reqs[0].Bytes, "case %d", i)
	}
}
