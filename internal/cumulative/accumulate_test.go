// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cumulative

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/storagetest"
)

// deltaSum is the monotonic delta sum "requests" with one integer point.
func deltaSum(start, ts pcommon.Timestamp, value int64) pmetric.Metrics {
	md := cumulativeSum(start, ts, value, nil)
	md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	return md
}

// accumulated is the cumulative point Accumulate left for md's one sum, if any.
func accumulated(t *testing.T, c *Tracker, md pmetric.Metrics, now time.Time) (start pcommon.Timestamp, value int64, ok bool, r Result) {
	t.Helper()
	c.Accumulate(context.Background(), md, now, &r)
	sum := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum()
	if sum.AggregationTemporality() != pmetric.AggregationTemporalityCumulative {
		t.Fatalf("temporality %v after Accumulate", sum.AggregationTemporality())
	}
	if sum.DataPoints().Len() == 0 {
		return 0, 0, false, r
	}
	dp := sum.DataPoints().At(0)
	return dp.StartTimestamp(), dp.IntValue(), true, r
}

func TestAccumulateAddsDeltasFromTheFirstStart(t *testing.T) {
	c := New(testConfig, nil)
	steps := []struct {
		start, ts time.Duration
		delta     int64
		want      int64
		sent      bool
		reason    Reason
	}{
		{0, 10 * time.Second, 5, 5, true, 0},
		{10 * time.Second, 20 * time.Second, 3, 8, true, 0},
		{10 * time.Second, 20 * time.Second, 3, 0, false, ReasonDuplicate}, // a client's retry
		{0, 15 * time.Second, 4, 0, false, ReasonOutOfOrder},
		{20 * time.Second, 30 * time.Second, 0, 8, true, 0},
		{30 * time.Second, 40 * time.Second, 2, 10, true, 0},
	}
	for i, s := range steps {
		start, got, ok, r := accumulated(t, c, deltaSum(at(s.start), at(s.ts), s.delta), testNow.Add(s.ts))
		if ok != s.sent {
			t.Fatalf("step %d: sent %v, want %v", i, ok, s.sent)
		}
		if !ok {
			if r.Dropped[s.reason] != 1 {
				t.Fatalf("step %d: dropped %v, want one %v", i, r.Dropped, s.reason)
			}
			continue
		}
		if got != s.want || start != at(0) {
			t.Fatalf("step %d: %d from %v, want %d from %v", i, got, start, s.want, at(0))
		}
	}
}

func TestAccumulateGoesOnAcrossARestart(t *testing.T) {
	data := map[string][]byte{}
	ctx := context.Background()
	first := New(testConfig, nil)
	first.Attach(ctx, storagetest.NewClient(data), testNow)
	for i, d := range []int64{5, 3} {
		ts := time.Duration(i+1) * 10 * time.Second
		_, _, ok, r := accumulated(t, first, deltaSum(at(ts-10*time.Second), at(ts), d), testNow.Add(ts))
		if !ok {
			t.Fatalf("point %d dropped", i)
		}
		if err := first.Save(ctx, r.Records); err != nil {
			t.Fatal(err)
		}
	}
	if err := first.Close(ctx); err != nil {
		t.Fatal(err)
	}

	second := New(testConfig, nil)
	load := second.Attach(ctx, storagetest.NewClient(data), testNow.Add(time.Minute))
	if load.Restored != 1 {
		t.Fatalf("restored %d series, want 1", load.Restored)
	}
	start, got, ok, _ := accumulated(t, second, deltaSum(at(50*time.Second), at(60*time.Second), 2), testNow.Add(time.Minute))
	if !ok || got != 10 || start != at(0) {
		t.Fatalf("after the restart: %d from %v (sent %v), want 10 from the first start %v", got, start, ok, at(0))
	}
	// The point sent before the restart, delivered again after it, is a duplicate.
	_, _, ok, r := accumulated(t, second, deltaSum(at(10*time.Second), at(20*time.Second), 3), testNow.Add(time.Minute))
	if ok || r.Dropped[ReasonOutOfOrder] != 1 {
		t.Fatalf("an old delta after the restart: sent %v, dropped %v", ok, r.Dropped)
	}
}

func TestAccumulateUndoTakesARefusedDeltaBack(t *testing.T) {
	c := New(testConfig, nil)
	if _, v, _, _ := accumulated(t, c, deltaSum(at(0), at(10*time.Second), 5), testNow); v != 5 {
		t.Fatalf("first total %d", v)
	}
	_, v, _, r := accumulated(t, c, deltaSum(at(10*time.Second), at(20*time.Second), 3), testNow)
	if v != 8 {
		t.Fatalf("second total %d", v)
	}
	c.Undo(r.Records) // the store refused it
	_, v, _, _ = accumulated(t, c, deltaSum(at(10*time.Second), at(20*time.Second), 3), testNow)
	if v != 8 {
		t.Fatalf("the refused delta offered again: total %d, want 8 (added once)", v)
	}
	// A refused first point leaves no series behind.
	c2 := New(testConfig, nil)
	_, _, _, r = accumulated(t, c2, deltaSum(at(0), at(10*time.Second), 5), testNow)
	c2.Undo(r.Records)
	if c2.Len() != 0 {
		t.Fatalf("%d series after undoing the only point", c2.Len())
	}
}

func TestAccumulateHistograms(t *testing.T) {
	c := New(testConfig, nil)
	bounds := []float64{1, 10}
	point := func(start, ts time.Duration, counts []uint64, sum, lo, hi float64) pmetric.Metrics {
		md := cumulativeHistogram(at(start), at(ts), bounds, counts, sum)
		h := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Histogram()
		h.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
		h.DataPoints().At(0).SetMin(lo)
		h.DataPoints().At(0).SetMax(hi)
		return md
	}
	var r Result
	md := point(0, 10*time.Second, []uint64{1, 2, 0}, 12, 0.5, 7)
	c.Accumulate(context.Background(), md, testNow, &r)
	md = point(10*time.Second, 20*time.Second, []uint64{0, 1, 3}, 80, 2, 30)
	c.Accumulate(context.Background(), md, testNow, &r)
	h := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Histogram()
	if h.AggregationTemporality() != pmetric.AggregationTemporalityCumulative {
		t.Fatal("not cumulative")
	}
	dp := h.DataPoints().At(0)
	if got := dp.BucketCounts().AsRaw(); got[0] != 1 || got[1] != 3 || got[2] != 3 || len(got) != 3 {
		t.Fatalf("buckets %v, want [1 3 3]", got)
	}
	if dp.Count() != 7 || dp.Sum() != 92 || dp.StartTimestamp() != at(0) || dp.Min() != 0.5 || dp.Max() != 30 {
		t.Fatalf("count %d sum %v start %v min %v max %v", dp.Count(), dp.Sum(), dp.StartTimestamp(), dp.Min(), dp.Max())
	}

	// Other bounds: the series starts anew from that point.
	md = cumulativeHistogram(at(20*time.Second), at(30*time.Second), []float64{5}, []uint64{2, 1}, 9)
	md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Histogram().SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	c.Accumulate(context.Background(), md, testNow, &r)
	dp = md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Histogram().DataPoints().At(0)
	if dp.Count() != 3 || dp.StartTimestamp() != at(20*time.Second) || dp.HasMin() {
		t.Fatalf("after new bounds: count %d from %v (min set %v), want 3 from the point's own start, no min", dp.Count(), dp.StartTimestamp(), dp.HasMin())
	}
}

func TestAccumulateExponentialHistogramsAtTheCoarserScale(t *testing.T) {
	c := New(testConfig, nil)
	point := func(start, ts time.Duration, scale, offset int32, counts []uint64, zero uint64) pmetric.Metrics {
		md := pmetric.NewMetrics()
		h := newMetric(md, "size", "By").SetEmptyExponentialHistogram()
		h.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
		dp := h.DataPoints().AppendEmpty()
		dp.SetStartTimestamp(at(start))
		dp.SetTimestamp(at(ts))
		dp.SetScale(scale)
		dp.SetZeroCount(zero)
		dp.Positive().SetOffset(offset)
		dp.Positive().BucketCounts().FromRaw(counts)
		n := zero
		for _, v := range counts {
			n += v
		}
		dp.SetCount(n)
		return md
	}
	var r Result
	c.Accumulate(context.Background(), point(0, 10*time.Second, 1, 0, []uint64{1, 2, 3, 4}, 1), testNow, &r)
	md := point(10*time.Second, 20*time.Second, 0, 1, []uint64{5}, 2)
	c.Accumulate(context.Background(), md, testNow, &r)
	dp := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).ExponentialHistogram().DataPoints().At(0)
	// Scale 1 buckets 0..3 fall into scale 0 buckets 0,0,1,1: [3 7] from
	// offset 0; plus [5] at offset 1: [3 12].
	got := dp.Positive().BucketCounts().AsRaw()
	if dp.Scale() != 0 || dp.Positive().Offset() != 0 || len(got) != 2 || got[0] != 3 || got[1] != 12 {
		t.Fatalf("scale %d offset %d buckets %v, want scale 0 offset 0 [3 12]", dp.Scale(), dp.Positive().Offset(), got)
	}
	if dp.ZeroCount() != 3 || dp.Count() != 18 || dp.StartTimestamp() != at(0) {
		t.Fatalf("zero %d count %d start %v", dp.ZeroCount(), dp.Count(), dp.StartTimestamp())
	}
}

func TestAccumulateLeavesOtherPointsAlone(t *testing.T) {
	c := New(testConfig, nil)
	md := cumulativeSum(at(0), at(10*time.Second), 7, nil) // cumulative already
	g := newMetric(md, "temperature", "Cel").SetEmptyGauge()
	g.DataPoints().AppendEmpty().SetDoubleValue(40)
	var r Result
	c.Accumulate(context.Background(), md, testNow, &r)
	dp := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints().At(0)
	if dp.IntValue() != 7 || md.DataPointCount() != 2 || c.Len() != 0 || len(r.Records) != 0 {
		t.Fatalf("value %d, %d points, %d series, %d records", dp.IntValue(), md.DataPointCount(), c.Len(), len(r.Records))
	}
}

func TestConvertKeepSummaries(t *testing.T) {
	md := pmetric.NewMetrics()
	s := newMetric(md, "rpc", "s").SetEmptySummary()
	dp := s.DataPoints().AppendEmpty()
	dp.SetStartTimestamp(at(0))
	dp.SetTimestamp(at(10 * time.Second))
	dp.SetCount(4)
	cfg := testConfig
	cfg.KeepSummaries = true
	var r Result
	New(cfg, nil).Convert(context.Background(), md, testNow, &r)
	if m := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0); m.Type() != pmetric.MetricTypeSummary || m.Summary().DataPoints().At(0).Count() != 4 {
		t.Fatalf("summary became %v", m.Type())
	}
}
