// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cumulative

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cumulativetest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/storagetest"
)

// histogramPoint is one point of a series of the "latency" histogram.
type histogramPoint struct {
	series string
	bounds []float64
	counts []uint64
}

// histograms is the "latency" histogram at ts with one point per series,
// all started an hour before testNow.
func histograms(ts time.Duration, points ...histogramPoint) pmetric.Metrics {
	md := pmetric.NewMetrics()
	h := newMetric(md, "latency", "s").SetEmptyHistogram()
	h.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	for _, p := range points {
		dp := h.DataPoints().AppendEmpty()
		dp.SetStartTimestamp(at(-time.Hour))
		dp.SetTimestamp(at(ts))
		dp.Attributes().PutStr("series", p.series)
		cumulativetest.FillHistogram(dp, p.bounds, p.counts, 1)
	}
	return md
}

// sentBuckets maps each series left in md after conversion to its bucket counts.
func sentBuckets(md pmetric.Metrics) map[string][]uint64 {
	out := map[string][]uint64{}
	dps := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Histogram().DataPoints()
	for i := 0; i < dps.Len(); i++ {
		series, _ := dps.At(i).Attributes().Get("series")
		out[series.Str()] = dps.At(i).BucketCounts().AsRaw()
	}
	return out
}

// seriesOf is the tracked series of the "latency" point with this series attribute.
func seriesOf(t *testing.T, c *Tracker, series string) *series {
	t.Helper()
	md := histograms(0, histogramPoint{series: series})
	rm := md.ResourceMetrics().At(0)
	m := rm.ScopeMetrics().At(0).Metrics().At(0)
	id := NewMetricID(rm.Resource().Attributes(), "", "", m.Name(), m.Type())
	s := c.lookup(uint64(id.Series(m.Histogram().DataPoints().At(0).Attributes())))
	require.NotNil(t, s, "series %q not tracked", series)
	return s
}

func sameArray(a, b []float64) bool { return len(a) > 0 && len(b) > 0 && &a[0] == &b[0] }

// The series of one histogram with the same bounds keep one copy of them.
func TestSeriesShareHistogramBounds(t *testing.T) {
	c, _ := newObserved(testConfig)
	bounds := []float64{1, 5, 10}
	convert(t, c, histograms(0, histogramPoint{"a", bounds, []uint64{1, 1, 1, 1}}, histogramPoint{"b", bounds, []uint64{2, 2, 2, 2}}), testNow)
	convert(t, c, histograms(time.Second, histogramPoint{"a", bounds, []uint64{2, 2, 2, 2}}, histogramPoint{"b", bounds, []uint64{3, 3, 3, 3}}), testNow)

	a, b := seriesOf(t, c, "a"), seriesOf(t, c, "b")
	for _, s := range []*series{a, b} {
		require.True(t, s.hasPrev)
		assert.Equal(t, bounds, s.cur.bounds)
		assert.True(t, sameArray(s.cur.bounds, a.cur.bounds), "cur bounds not shared")
		assert.True(t, sameArray(s.prev.bounds, a.cur.bounds), "prev bounds not shared")
	}
}

// Shared bounds are never written to: when one series changes its bounds,
// its neighbours keep theirs and their deltas.
func TestBoundsChangeOfOneSeriesLeavesItsNeighboursAlone(t *testing.T) {
	c, _ := newObserved(testConfig)
	x, y := []float64{1, 5, 10}, []float64{2, 4, 8}
	convert(t, c, histograms(0, histogramPoint{"a", x, []uint64{1, 1, 1, 1}}, histogramPoint{"b", x, []uint64{1, 1, 1, 1}}), testNow)
	convert(t, c, histograms(time.Second, histogramPoint{"a", x, []uint64{2, 3, 4, 5}}, histogramPoint{"b", x, []uint64{2, 2, 2, 2}}), testNow)

	md := histograms(2*time.Second, histogramPoint{"a", x, []uint64{3, 5, 7, 9}}, histogramPoint{"b", y, []uint64{5, 5, 5, 5}})
	r := convert(t, c, md, testNow)
	assert.Equal(t, map[string][]uint64{"a": {1, 2, 3, 4}}, sentBuckets(md), "b's new layout is a baseline, a goes on")
	assert.Equal(t, 1, r.Dropped[ReasonBucketLayoutChanged])
	assert.Equal(t, x, seriesOf(t, c, "a").cur.bounds)

	md = histograms(3*time.Second, histogramPoint{"a", x, []uint64{4, 6, 8, 10}}, histogramPoint{"b", y, []uint64{6, 7, 8, 9}})
	r = convert(t, c, md, testNow)
	assert.Equal(t, map[string][]uint64{"a": {1, 1, 1, 1}, "b": {1, 2, 3, 4}}, sentBuckets(md))
	assert.Zero(t, r.Dropped[ReasonBucketLayoutChanged])
	assert.Equal(t, x, seriesOf(t, c, "a").cur.bounds)
	assert.Equal(t, y, seriesOf(t, c, "b").cur.bounds)
}

// Series restored after a restart share their bounds again.
func TestRestoredSeriesShareBounds(t *testing.T) {
	client := storagetest.NewClient(nil)
	c, _ := newObserved(testConfig)
	c.Attach(context.Background(), client, testNow)
	bounds := []float64{1, 5, 10}
	convert(t, c, histograms(0, histogramPoint{"a", bounds, []uint64{1, 1, 1, 1}}, histogramPoint{"b", bounds, []uint64{2, 2, 2, 2}}), testNow)
	convert(t, c, histograms(time.Second, histogramPoint{"a", bounds, []uint64{2, 2, 2, 2}}, histogramPoint{"b", bounds, []uint64{3, 3, 3, 3}}), testNow)

	restarted, _ := newObserved(testConfig)
	load := restarted.Attach(context.Background(), client, testNow)
	require.Equal(t, 2, load.Restored)
	a, b := seriesOf(t, restarted, "a"), seriesOf(t, restarted, "b")
	for _, s := range []*series{a, b} {
		assert.Equal(t, bounds, s.prev.bounds)
		assert.True(t, sameArray(s.cur.bounds, a.cur.bounds), "cur bounds not shared")
		assert.True(t, sameArray(s.prev.bounds, a.cur.bounds), "prev bounds not shared")
	}

	md := histograms(2*time.Second, histogramPoint{"a", bounds, []uint64{3, 4, 5, 6}}, histogramPoint{"b", bounds, []uint64{3, 3, 3, 4}})
	convert(t, restarted, md, testNow)
	assert.Equal(t, map[string][]uint64{"a": {1, 2, 3, 4}, "b": {0, 0, 0, 1}}, sentBuckets(md))
}

// Past maxLayouts distinct bounds, a new layout is its series' own, and
// its deltas are as exact as a shared one's.
func TestLayoutsBeyondTheCapAreKeptPerSeries(t *testing.T) {
	cfg := testConfig
	cfg.MaxSeries = 2 * maxLayouts
	c, _ := newObserved(cfg)
	n := maxLayouts + 20
	first, second := make([]histogramPoint, n), make([]histogramPoint, n)
	for i := range n {
		bounds := []float64{float64(i), float64(i + 1)}
		first[i] = histogramPoint{fmt.Sprint(i), bounds, []uint64{1, 1, 1}}
		second[i] = histogramPoint{fmt.Sprint(i), bounds, []uint64{2, 3, uint64(4 + i)}}
	}
	convert(t, c, histograms(0, first...), testNow)
	md := histograms(time.Second, second...)
	convert(t, c, md, testNow)

	assert.Len(t, c.layouts.byHash, maxLayouts)
	sent := sentBuckets(md)
	require.Len(t, sent, n)
	for i := range n {
		assert.Equal(t, []uint64{1, 2, uint64(3 + i)}, sent[fmt.Sprint(i)], "series %d", i)
		assert.Equal(t, second[i].bounds, seriesOf(t, c, fmt.Sprint(i)).cur.bounds)
	}
}

// Two layouts with the same hash are told apart: the second is not shared.
func TestLayoutHashCollisionIsNotShared(t *testing.T) {
	var l layouts
	b := []float64{1, 2, 3}
	other := l.shared([]float64{7, 8})
	l.byHash = map[uint64][]float64{hashBounds(b): other} // as if b's hash were other's

	got := l.shared(b)
	assert.Equal(t, b, got)
	assert.False(t, sameArray(got, other))
	assert.False(t, sameArray(got, b), "the caller's slice is never kept")
	assert.Equal(t, []float64{7, 8}, l.byHash[hashBounds(b)], "the shared layout is left as it was")
	_, ok := l.id(got)
	assert.False(t, ok, "saved inline: its hash stands for the other layout")
	_, ok = l.id(slices.Clone(other))
	assert.False(t, ok, "equal bounds that are not the table's own are saved inline")
	assert.Nil(t, l.shared(nil))
	assert.True(t, slices.Equal(l.shared(b), b))
}

// A histogram point is kept with room for its bucket counts within it
// (8 or 16; more apart): a series whose layout grows past that room, and
// shrinks back, goes on with exact deltas at each size.
func TestSeriesOutgrowingTheRoomForItsBucketsGoesOn(t *testing.T) {
	c, _ := newObserved(testConfig)
	layout := func(buckets int) []float64 {
		bounds := make([]float64, buckets-1)
		for i := range bounds {
			bounds[i] = float64(i + 1)
		}
		return bounds
	}
	fill := func(buckets int, v uint64) []uint64 {
		counts := make([]uint64, buckets)
		for i := range counts {
			counts[i] = v * uint64(i+1)
		}
		return counts
	}
	ts := time.Duration(0)
	for i, buckets := range []int{4, 8, 9, 16, 17, 40, 4} {
		bounds := layout(buckets)
		ts += time.Second
		md := histograms(ts, histogramPoint{"a", bounds, fill(buckets, 1)})
		r := convert(t, c, md, testNow)
		if i > 0 {
			assert.Equal(t, 1, r.Dropped[ReasonBucketLayoutChanged], "%d buckets: a new layout is a baseline", buckets)
		}
		for _, v := range []uint64{3, 4} {
			ts += time.Second
			md = histograms(ts, histogramPoint{"a", bounds, fill(buckets, v)})
			convert(t, c, md, testNow)
			want := fill(buckets, 1)
			if v == 3 {
				want = fill(buckets, 2)
			}
			require.Equal(t, map[string][]uint64{"a": want}, sentBuckets(md), "%d buckets, cumulative %d", buckets, v)
		}
		s := seriesOf(t, c, "a")
		assert.Equal(t, fill(buckets, 4), s.cur.counts, "%d buckets", buckets)
		assert.Equal(t, fill(buckets, 3), s.prev.counts, "%d buckets", buckets)
	}
}
