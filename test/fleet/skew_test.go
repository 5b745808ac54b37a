// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
)

// processed is a service's delta counter of processed vectors at ts.
func processed(worker string, v int64, ts time.Time) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "vector-index-build")
	rm.Resource().Attributes().PutStr("service.instance.id", worker)
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("vectors.processed")
	m.SetUnit("{vector}")
	s := m.SetEmptySum()
	s.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	s.SetIsMonotonic(true)
	dp := s.DataPoints().AppendEmpty()
	dp.Attributes().PutStr("build.engine", "faiss")
	dp.SetStartTimestamp(pcommonTime(ts.Add(-time.Second)))
	dp.SetTimestamp(pcommonTime(ts))
	dp.SetIntValue(v)
	return md
}

// TestWorkerClockAheadIsRefusedAlone: three workers send the same delta
// series through their own sidecars, one with its clock 3 h ahead. The
// skewed worker's points are refused at the gateway's receipt, counted and
// logged naming the worker; the other two land exactly, in datums stamped
// with the gateway's time (not the skewed worker's, which CloudWatch would
// refuse with every other worker's data in it).
func TestWorkerClockAheadIsRefusedAlone(t *testing.T) {
	cw, err := cloudwatchtest.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = cw.Close() })
	gw := newNode(t, "otelcol-gateway.yaml", gatewayEnv(cw, 2*time.Second)...)
	gw.start()
	workers := []struct {
		name string
		skew time.Duration
	}{{"worker-on-time-1", 0}, {"worker-3h-ahead", 3 * time.Hour}, {"worker-on-time-2", 0}}
	var want int64
	start := time.Now()
	for i, w := range workers {
		sc := newNode(t, sidecarConfig, sidecarEnv(gw)...)
		sc.start()
		conn, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", sc.grpc), grpc.WithTransportCredentials(insecure.NewCredentials()))
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close() })
		client := pmetricotlp.NewGRPCClient(conn)
		for r := range 5 {
			v := int64(10*(i+1) + r)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := client.Export(ctx, pmetricotlp.NewExportRequestFromMetrics(processed(w.name, v, time.Now().Add(w.skew))))
			cancel()
			require.NoError(t, err)
			if w.skew == 0 {
				want += v
			}
		}
	}
	var got float64
	ok := binarytest.Eventually(60*time.Second, func() bool {
		got, _ = landed(cw.Datums(), "vectors.processed", map[string]string{"build.engine": "faiss"})
		return got == float64(want)
	})
	require.True(t, ok, "landed %v, want %d (the on-time workers' total)", got, want)
	require.True(t, binarytest.Eventually(30*time.Second, func() bool {
		return gw.telemetryValue("otelcol_intervalmerge_points_out_of_range") == 5
	}), "the skewed worker's 5 points counted as refused")
	assert.Contains(t, gw.Output.String(), "too far from the gateway's clock")
	assert.Contains(t, gw.Output.String(), "worker-3h-ahead", "the log names the worker")
	assert.NotContains(t, gw.Output.String(), "worker-on-time-1")
	for _, d := range cw.Datums() {
		assert.WithinDuration(t, time.Now(), d.Timestamp, time.Since(start)+time.Minute, "%s stamped with the gateway's time", d.MetricName)
	}
	assert.Equal(t, 0, cw.Stats().Rejected, "CloudWatch refused nothing")
}
