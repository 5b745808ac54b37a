// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter

import (
	"context"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
)

// groups makes datums for points of the given sizes (datums per point).
func groups(sizes ...int) []datum {
	var out []datum
	for p, n := range sizes {
		for i := 0; i < n; i++ {
			out = append(out, datum{name: "m", kind: kindValue, resolution: 60, point: int32(p)})
		}
	}
	return out
}

func requestSizes(reqs []packedRequest) []int {
	var n []int
	for _, r := range reqs {
		n = append(n, r.n)
	}
	return n
}

// assertPointsWhole checks that no data point is split across requests.
func assertPointsWhole(t *testing.T, packed []datum, reqs []packedRequest) {
	t.Helper()
	home := map[int32]int{}
	for ri, r := range reqs {
		for _, d := range packed[r.first : r.first+r.n] {
			if prev, ok := home[d.point]; ok && prev != ri {
				t.Fatalf("point %d is in requests %d and %d", d.point, prev, ri)
			}
			home[d.point] = ri
		}
	}
}

func TestPackByCount(t *testing.T) {
	sizes := make([]int, 2500)
	for i := range sizes {
		sizes[i] = 1
	}
	packed := groups(sizes...)
	reqs := pack(packed, "NS", nil)
	assert.Equal(t, []int{1000, 1000, 500}, requestSizes(reqs))
	assert.Len(t, packed, 2500)
}

func TestPackFillsGapsFirstFit(t *testing.T) {
	// 999 histograms of 3 datums and 3 gauges: 3000 datums. In order, each
	// request would hold 333 histograms (999 datums) and the gauges would
	// need a fourth; first-fit puts them in the gaps: 3 requests.
	var sizes []int
	for i := 0; i < 999; i++ {
		sizes = append(sizes, 3)
	}
	sizes = append(sizes, 1, 1, 1)
	packed := groups(sizes...)
	reqs := pack(packed, "NS", nil)
	assert.Equal(t, []int{1000, 1000, 1000}, requestSizes(reqs))
	assertPointsWhole(t, packed, reqs)
}

// pack reorders the datums in place: afterwards they are the same datums,
// each request's in their first order, each point's adjacent.
func TestPackReordersInPlaceKeepingEveryDatum(t *testing.T) {
	var sizes []int
	for range 700 {
		sizes = append(sizes, 3) // requests of 999 datums, room for one more
	}
	sizes = append(sizes, 1, 1, 1100, 2, 1) // gap fillers, a point split across requests
	ds := groups(sizes...)
	for i := range ds {
		ds[i].value = float64(i) // its place before pack
	}
	reqs := pack(ds, "NS", nil)

	moved := 0
	seen := make([]bool, len(ds))
	for _, r := range reqs {
		prev := -1.0
		for i, d := range ds[r.first : r.first+r.n] {
			require.False(t, seen[int(d.value)], "datum %v twice", d.value)
			seen[int(d.value)] = true
			assert.Greater(t, d.value, prev, "request order is first order")
			prev = d.value
			if int(d.value) != r.first+i {
				moved++
			}
		}
	}
	assert.NotContains(t, seen, false, "every datum is still there")
	assert.Positive(t, moved, "first-fit moved datums; the case tests the reordering")
	assertPointsWhole(t, ds, reqs[:len(reqs)-1]) // all but the split point's last request
}

// What a flush holds while its requests are sent is mostly datums.
func TestDatumStaysSmall(t *testing.T) {
	assert.LessOrEqual(t, unsafe.Sizeof(datum{}), uintptr(96))
}

func TestPackSplitsAPointTooBigForOneRequest(t *testing.T) {
	packed := groups(2, 1200, 5)
	reqs := pack(packed, "NS", nil)
	total := 0
	for _, r := range reqs {
		assert.LessOrEqual(t, r.n, maxDatumsPerRequest)
		total += r.n
	}
	assert.Equal(t, 1207, total)
	assert.Len(t, reqs, 2)
	assert.Len(t, packed, 1207)
}

func TestPackByBytes(t *testing.T) {
	// Datums of 30 dimensions with 1000-character values: about 31 kB each.
	dims := make([]dimension, 30)
	for i := range dims {
		dims[i] = dimension{strings.Repeat(string(rune('a'+i)), 10), strings.Repeat("v", 1000)}
	}
	var ds []datum
	for p := 0; p < 100; p++ {
		ds = append(ds, datum{name: "m", dims: dims, kind: kindValue, resolution: 60, point: int32(p)})
	}
	size := datumSize(&ds[0])
	perRequest := (maxRequestBytes - requestEnvelopeSize("NS")) / size
	reqs := pack(ds, "NS", nil)
	assert.Len(t, reqs, (100+perRequest-1)/perRequest, "the fewest requests the byte limit allows")
	for _, r := range reqs {
		assert.LessOrEqual(t, r.bytes, maxRequestBytes)
	}
}

// The size pack computes must be the body the SDK sends, byte for byte:
// the server measures the decompressed body.
func TestPackSizeIsTheSerializedSize(t *testing.T) {
	isolateAWS(t)
	server, err := cloudwatchtest.Start("127.0.0.1:0")
	require.NoError(t, err)
	defer server.Close()
	cfg := testConfig()
	cfg.Region = "eu-west-1"
	awsCfg, err := loadAWSConfig(context.Background(), cfg)
	require.NoError(t, err)
	putter := newCloudWatchPutter(awsCfg, server.Endpoint())

	now := pcommon.NewTimestampFromTime(time.Now())
	values := make([]float64, 150)
	counts := make([]float64, 150)
	for i := range values {
		values[i], counts[i] = float64(i), 1
	}
	cases := [][]datum{
		{{name: "m", kind: kindValue, timestamp: now, resolution: 60, unit: unitIDOf(types.StandardUnitNone)}},
		{{name: "m", kind: kindValue, timestamp: now, resolution: 1}},
		{{name: strings.Repeat("n", 23), kind: kindValue, timestamp: now, resolution: 60, unit: unitIDOf(types.StandardUnitBytesSecond)}},
		{{name: strings.Repeat("n", 24), kind: kindValue, timestamp: now, resolution: 60}},
		{{name: strings.Repeat("n", 255), kind: kindValue, timestamp: now, resolution: 60}},
		{{name: "s", kind: kindStatistics, floats: []float64{1, 2, 2, 2}, timestamp: now, resolution: 60, unit: unitIDOf(types.StandardUnitSeconds)}},
		{{name: "v", kind: kindValues, floats: append(values, counts...), timestamp: now, resolution: 60}},
		{{name: "d", kind: kindValue, timestamp: now, resolution: 60, dims: []dimension{
			{"a", "b"}, {strings.Repeat("k", 255), strings.Repeat("v", 1024)}, {strings.Repeat("k", 24), strings.Repeat("v", 256)},
		}}},
	}
	for i, ds := range cases {
		for j := range ds {
			ds[j].point = int32(j)
		}
		server.Reset()
		packed, reqs := ds, pack(ds, "Test/NS", nil)
		require.Len(t, reqs, 1)
		require.NoError(t, putter.put(context.Background(), "Test/NS", packed))
		got := server.Requests()
		require.Len(t, got, 1)
		assert.Equal(t, got[0].BodyBytes, reqs[0].bytes, "case %d", i)
	}
}
