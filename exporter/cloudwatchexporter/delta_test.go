// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter

import (
	"context"
	"testing"
	"time"

	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/delta"
	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/translate"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

func newTestConverter() *delta.Converter {
	return delta.NewConverter(CumulativeStateConfig{TTL: time.Hour, MaxSeries: 100}.trackerConfig())
}

// convertInto converts md at now and adds its dropped points to d.
func convertInto(c *delta.Converter, md pmetric.Metrics, now time.Time, d *translate.DropCounts) delta.Conversion {
	var cv delta.Conversion
	c.Convert(context.Background(), md, now, &cv)
	d.Add(&cv.Dropped)
	return cv
}

// sumStep is one cumulative point fed to the converter and what should come out.
type sumStep struct {
	start, ts time.Duration // relative to testNow; start < 0 means "unknown" when zeroStart
	zeroStart bool
	value     int64
	want      int64 // the delta sent
	drop      translate.DropReason
	dropped   bool
}

func runSumSteps(t *testing.T, c *delta.Converter, steps []sumStep) {
	t.Helper()
	for i, s := range steps {
		start := at(s.start)
		if s.zeroStart {
			start = 0
		}
		md := cumulativeSum(start, at(s.ts), s.value, map[string]string{"stage": "upload"})
		var dropped translate.DropCounts
		convertInto(c, md, testNow, &dropped)
		sum := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum()
		assert.Equal(t, pmetric.AggregationTemporalityDelta, sum.AggregationTemporality(), "step %d", i)
		if s.dropped {
			assert.Equal(t, 0, sum.DataPoints().Len(), "step %d: dropped", i)
			assert.Equal(t, 1, dropped[s.drop], "step %d: reason %s", i, s.drop)
			continue
		}
		require.Equal(t, 1, sum.DataPoints().Len(), "step %d: sent", i)
		assert.Equal(t, s.want, sum.DataPoints().At(0).IntValue(), "step %d", i)
		assert.Zero(t, dropped.Total(), "step %d", i)
	}
}

func TestDeltaSumFirstPointKeptWhenStartKnown(t *testing.T) {
	runSumSteps(t, newTestConverter(), []sumStep{
		{start: -time.Minute, ts: 0, value: 5, want: 5}, // the delta since start
		{start: -time.Minute, ts: time.Minute, value: 8, want: 3},
		{start: -time.Minute, ts: 2 * time.Minute, value: 8, want: 0},
		{start: -time.Minute, ts: 3 * time.Minute, value: 15, want: 7},
	})
}

func TestDeltaSumFirstPointWithoutStartIsBaseline(t *testing.T) {
	runSumSteps(t, newTestConverter(), []sumStep{
		{zeroStart: true, ts: 0, value: 100, dropped: true, drop: translate.ReasonCumulativeBaseline},
		// The baseline again: there is no delta to give for it.
		{zeroStart: true, ts: 0, value: 100, dropped: true, drop: translate.ReasonDuplicate},
		{zeroStart: true, ts: time.Minute, value: 130, want: 30},
	})
}

func TestDeltaSumResets(t *testing.T) {
	runSumSteps(t, newTestConverter(), []sumStep{
		{start: -time.Minute, ts: 0, value: 10, want: 10},
		{start: -time.Minute, ts: time.Minute, value: 15, want: 5},
		// The process restarted: a new start time; 2 is counted since then.
		{start: 90 * time.Second, ts: 2 * time.Minute, value: 2, want: 2},
		{start: 90 * time.Second, ts: 3 * time.Minute, value: 6, want: 4},
		// The value fell with the same start time: a reset, not -5.
		{start: 90 * time.Second, ts: 4 * time.Minute, value: 1, want: 1},
		{start: 90 * time.Second, ts: 5 * time.Minute, value: 3, want: 2},
	})
}

func TestDeltaSumDuplicateAndOutOfOrder(t *testing.T) {
	runSumSteps(t, newTestConverter(), []sumStep{
		{start: -time.Minute, ts: 0, value: 5, want: 5},
		{start: -time.Minute, ts: 0, value: 5, want: 5}, // the first point again
		{start: -time.Minute, ts: 2 * time.Minute, value: 8, want: 3},
		{start: -time.Minute, ts: 2 * time.Minute, value: 8, want: 3}, // re-sent: same delta, not 0
		{start: -time.Minute, ts: time.Minute, value: 6, dropped: true, drop: translate.ReasonOutOfOrder},
		{start: -time.Minute, ts: 3 * time.Minute, value: 10, want: 2},
	})
}

func TestDeltaSeriesIdentity(t *testing.T) {
	c := newTestConverter()
	convert := func(md pmetric.Metrics) int64 {
		var d translate.DropCounts
		convertInto(c, md, testNow, &d)
		dps := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints()
		require.Equal(t, 1, dps.Len())
		return dps.At(0).IntValue()
	}
	assert.Equal(t, int64(10), convert(cumulativeSum(at(-time.Minute), at(0), 10, map[string]string{"a": "1", "b": "2"})))
	// Same attributes in another order: the same series.
	md := cumulativeSum(at(-time.Minute), at(time.Minute), 15, nil)
	attrs := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints().At(0).Attributes()
	attrs.PutStr("b", "2")
	attrs.PutStr("a", "1")
	assert.Equal(t, int64(5), convert(md))
	// Another attribute value: another series, its first point kept.
	assert.Equal(t, int64(7), convert(cumulativeSum(at(-time.Minute), at(time.Minute), 7, map[string]string{"a": "1", "b": "3"})))
	// Another process instance (a resource attribute that is not a dimension): another series.
	md = cumulativeSum(at(-time.Minute), at(2*time.Minute), 40, map[string]string{"a": "1", "b": "2"})
	md.ResourceMetrics().At(0).Resource().Attributes().PutStr("service.instance.id", "instance-2")
	assert.Equal(t, int64(40), convert(md))
	assert.Equal(t, 3, c.SeriesCount())
}

func TestDeltaDoubleSum(t *testing.T) {
	c := newTestConverter()
	md := pmetric.NewMetrics()
	sum := newMetric(md, "energy", "J").SetEmptySum()
	sum.SetIsMonotonic(true)
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	for i, v := range []float64{1.5, 4.0} {
		dp := sum.DataPoints().AppendEmpty()
		dp.SetStartTimestamp(at(-time.Minute))
		dp.SetTimestamp(at(time.Duration(i) * time.Minute))
		dp.SetDoubleValue(v)
	}
	var d translate.DropCounts
	convertInto(c, md, testNow, &d)
	require.Equal(t, 2, sum.DataPoints().Len())
	assert.Equal(t, 1.5, sum.DataPoints().At(0).DoubleValue())
	assert.Equal(t, 2.5, sum.DataPoints().At(1).DoubleValue())
	assert.Equal(t, at(0), sum.DataPoints().At(1).StartTimestamp(), "a delta starts at the previous point")
}

func TestDeltaLeavesOtherDataAlone(t *testing.T) {
	md := gaugeMetrics("g", "", 3)
	upDown := newMetric(md, "u", "").SetEmptySum()
	upDown.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	upDown.DataPoints().AppendEmpty().SetIntValue(-4)
	before := pmetric.NewMetrics()
	md.CopyTo(before)

	var d translate.DropCounts
	cv := convertInto(newTestConverter(), md, testNow, &d)
	assert.Equal(t, before, md)
	assert.Empty(t, cv.Records)
}

func cumulativeHistogram(start, t pcommon.Timestamp, bounds []float64, counts []uint64, sum, minV, maxV float64) pmetric.Metrics {
	md := pmetric.NewMetrics()
	h := newMetric(md, "latency", "s").SetEmptyHistogram()
	h.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	dp := h.DataPoints().AppendEmpty()
	dp.SetStartTimestamp(start)
	dp.SetTimestamp(t)
	fillHistogram(dp, bounds, counts, sum)
	dp.SetMin(minV)
	dp.SetMax(maxV)
	return md
}

func histogramPoints(md pmetric.Metrics) pmetric.HistogramDataPointSlice {
	return md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Histogram().DataPoints()
}

func TestDeltaHistogram(t *testing.T) {
	c := newTestConverter()
	var d translate.DropCounts
	bounds := []float64{1, 10}

	first := cumulativeHistogram(at(-time.Minute), at(0), bounds, []uint64{1, 2, 0}, 9, 0.5, 5)
	convertInto(c, first, testNow, &d)
	dp := histogramPoints(first).At(0)
	assert.Equal(t, []uint64{1, 2, 0}, dp.BucketCounts().AsRaw(), "first point: the delta since start")
	assert.Equal(t, 0.5, dp.Min())
	assert.Equal(t, 5.0, dp.Max())

	// Two more observations: 20 (a new max) and 3.
	second := cumulativeHistogram(at(-time.Minute), at(time.Minute), bounds, []uint64{1, 3, 1}, 32, 0.5, 20)
	convertInto(c, second, testNow, &d)
	dp = histogramPoints(second).At(0)
	assert.Equal(t, pmetric.AggregationTemporalityDelta, second.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Histogram().AggregationTemporality())
	assert.Equal(t, []uint64{0, 1, 1}, dp.BucketCounts().AsRaw())
	assert.Equal(t, uint64(2), dp.Count())
	assert.Equal(t, 23.0, dp.Sum())
	assert.False(t, dp.HasMin(), "the lifetime min did not change: the interval's min is unknown")
	assert.True(t, dp.HasMax())
	assert.Equal(t, 20.0, dp.Max(), "a new lifetime max was observed in this interval")

	// A bucket fell: reset, the point counts since the reset.
	third := cumulativeHistogram(at(-time.Minute), at(2*time.Minute), bounds, []uint64{0, 1, 0}, 4, 4, 4)
	convertInto(c, third, testNow, &d)
	assert.Equal(t, []uint64{0, 1, 0}, histogramPoints(third).At(0).BucketCounts().AsRaw())

	// New bounds with the same start time cannot be subtracted.
	fourth := cumulativeHistogram(at(-time.Minute), at(3*time.Minute), []float64{1, 5, 10}, []uint64{0, 1, 1, 0}, 10, 4, 6)
	convertInto(c, fourth, testNow, &d)
	assert.Equal(t, 0, histogramPoints(fourth).Len())
	assert.Equal(t, 1, d[translate.ReasonBucketLayoutChanged])
	// ... and it is the baseline for the next one.
	fifth := cumulativeHistogram(at(-time.Minute), at(4*time.Minute), []float64{1, 5, 10}, []uint64{0, 1, 2, 0}, 17, 4, 7)
	convertInto(c, fifth, testNow, &d)
	assert.Equal(t, []uint64{0, 0, 1, 0}, histogramPoints(fifth).At(0).BucketCounts().AsRaw())
	assert.Equal(t, 7.0, histogramPoints(fifth).At(0).Sum())
}

func cumulativeExponential(start, t pcommon.Timestamp, scale int32, offset int32, counts []uint64, zero uint64, sum float64) pmetric.Metrics {
	md := pmetric.NewMetrics()
	h := newMetric(md, "size", "By").SetEmptyExponentialHistogram()
	h.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	dp := h.DataPoints().AppendEmpty()
	dp.SetStartTimestamp(start)
	dp.SetTimestamp(t)
	dp.SetScale(scale)
	dp.Positive().SetOffset(offset)
	dp.Positive().BucketCounts().FromRaw(counts)
	dp.SetZeroCount(zero)
	n := zero
	for _, c := range counts {
		n += c
	}
	dp.SetCount(n)
	dp.SetSum(sum)
	return md
}

func TestDeltaExponentialHistogramAcrossScales(t *testing.T) {
	c := newTestConverter()
	var d translate.DropCounts
	// Scale 1: index 2 is (2,2.83], 3 is (2.83,4], 4 is (4,5.66], 5 is (5.66,8].
	first := cumulativeExponential(at(-time.Minute), at(0), 1, 2, []uint64{1, 1, 1, 1}, 1, 20)
	convertInto(c, first, testNow, &d)

	// The SDK lowered the scale to 0: index 1 is (2,4], 2 is (4,8], 3 is (8,16].
	// Observed meanwhile: one in (4,8], two in (8,16], one zero.
	second := cumulativeExponential(at(-time.Minute), at(time.Minute), 0, 1, []uint64{2, 3, 2}, 2, 60)
	convertInto(c, second, testNow, &d)
	dp := second.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).ExponentialHistogram().DataPoints().At(0)
	// prev at scale 0: index 1 holds 2 (indexes 2,3 at scale 1), index 2 holds 2 (indexes 4,5).
	assert.Equal(t, int32(0), dp.Scale())
	assert.Equal(t, int32(1), dp.Positive().Offset())
	assert.Equal(t, []uint64{0, 1, 2}, dp.Positive().BucketCounts().AsRaw())
	assert.Equal(t, uint64(1), dp.ZeroCount())
	assert.Equal(t, uint64(4), dp.Count())
	assert.Equal(t, 40.0, dp.Sum())
	assert.Zero(t, d.Total())
}

func TestDeltaSummaryBecomesStatistics(t *testing.T) {
	c := newTestConverter()
	var d translate.DropCounts
	summary := func(ts pcommon.Timestamp, count uint64, sum, q0, q1 float64) pmetric.Metrics {
		md := pmetric.NewMetrics()
		m := newMetric(md, "rpc.duration", "s")
		dp := m.SetEmptySummary().DataPoints().AppendEmpty()
		dp.SetStartTimestamp(at(-time.Minute))
		dp.SetTimestamp(ts)
		dp.SetCount(count)
		dp.SetSum(sum)
		dp.Attributes().PutStr("method", "build")
		for q, v := range map[float64]float64{0: q0, 0.5: (q0 + q1) / 2, 1: q1} {
			qv := dp.QuantileValues().AppendEmpty()
			qv.SetQuantile(q)
			qv.SetValue(v)
		}
		return md
	}
	convertInto(c, summary(at(0), 4, 10, 1, 4), testNow, &d)
	md := summary(at(time.Minute), 6, 20, 1, 6)
	convertInto(c, md, testNow, &d)

	m := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0)
	require.Equal(t, pmetric.MetricTypeHistogram, m.Type())
	assert.Equal(t, pmetric.AggregationTemporalityDelta, m.Histogram().AggregationTemporality())
	dp := m.Histogram().DataPoints().At(0)
	assert.Equal(t, uint64(2), dp.Count())
	assert.Equal(t, 10.0, dp.Sum())
	assert.Equal(t, 1.0, dp.Min())
	assert.Equal(t, 6.0, dp.Max())
	v, _ := dp.Attributes().Get("method")
	assert.Equal(t, "build", v.Str())

	tr := translateAll(testConfig(), md)
	require.Len(t, tr.Datums, 1)
	assert.Equal(t, translate.StatisticSet{SampleCount: 2, Sum: 10, Min: 1, Max: 6}, tr.Datums[0].Stats())
}

func TestDeltaStateIsBounded(t *testing.T) {
	c := delta.NewConverter(CumulativeStateConfig{TTL: 10 * time.Minute, MaxSeries: 2}.trackerConfig())
	convertAt := func(now time.Time, series string, start, ts pcommon.Timestamp, v int64) (int64, translate.DropCounts, int64) {
		var d translate.DropCounts
		md := cumulativeSum(start, ts, v, map[string]string{"series": series})
		evicted := convertInto(c, md, now, &d).Evictions
		dps := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints()
		if dps.Len() == 0 {
			return -1, d, evicted
		}
		return dps.At(0).IntValue(), d, evicted
	}
	start := at(-time.Hour)
	v, _, _ := convertAt(testNow, "a", start, at(0), 10)
	assert.Equal(t, int64(10), v)
	convertAt(testNow, "b", start, at(0), 20)
	// A third series makes the least recently seen one ("a") go.
	_, _, evicted := convertAt(testNow, "c", at(-time.Second), at(0), 30)
	assert.Equal(t, int64(1), evicted)
	assert.Equal(t, 2, c.SeriesCount())

	// "a" comes back: its start time is before the newest forgotten point,
	// so it may have been sent before; it is a baseline, not 15 sent twice.
	v, d, _ := convertAt(testNow.Add(time.Minute), "a", start, at(time.Minute), 15)
	assert.Equal(t, int64(-1), v)
	assert.Equal(t, 1, d[translate.ReasonCumulativeBaseline])
	// A series that started after the newest forgotten point is new for sure.
	v, _, _ = convertAt(testNow.Add(time.Minute), "d", at(30*time.Second), at(time.Minute), 4)
	assert.Equal(t, int64(4), v)

	// Idle past the TTL: everything is forgotten.
	_, _, evicted = convertAt(testNow.Add(time.Hour), "e", at(59*time.Minute), at(time.Hour), 1)
	assert.Equal(t, int64(2), evicted)
	assert.Equal(t, 1, c.SeriesCount())
}

func TestDeltaUndo(t *testing.T) {
	c := newTestConverter()
	var d translate.DropCounts
	convert := func(ts time.Duration, v int64) (pmetric.Metrics, []delta.Record) {
		md := cumulativeSum(at(-time.Minute), at(ts), v, nil)
		return md, convertInto(c, md, testNow, &d).Records
	}
	value := func(md pmetric.Metrics) int64 {
		return md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints().At(0).IntValue()
	}
	_, _ = convert(0, 10)
	md, records := convert(time.Minute, 15)
	assert.Equal(t, int64(5), value(md))
	// The queue refused it: the next point's delta must cover these 5 too.
	c.Undo(records)
	md, _ = convert(2*time.Minute, 18)
	assert.Equal(t, int64(8), value(md))

	// A refused first point is forgotten, so it is a first point again.
	c2 := newTestConverter()
	md = cumulativeSum(at(-time.Minute), at(0), 10, map[string]string{"x": "y"})
	convertInto(c2, md, testNow, &d)
	c2.UndoPoints(md)
	assert.Equal(t, 0, c2.SeriesCount())
}

// A cumulative point stamped hours ahead (a client with a wrong clock) is
// refused for its series, counted as too_new, and the series' later
// increments still arrive: what lands adds up to the series' last value.
func TestPointFromTheFutureDoesNotStopItsSeries(t *testing.T) {
	te := newTestExporter(t, false, nil)
	now := time.Now()
	start := ts(now.Add(-time.Hour))
	for _, p := range []struct {
		at    time.Time
		value int64
	}{
		{now, 10},
		{now.Add(3 * time.Hour), 1000},
		{now.Add(time.Second), 15},
		{now.Add(2 * time.Second), 21},
	} {
		require.NoError(t, te.ConsumeMetrics(context.Background(), cumulativeSum(start, ts(p.at), p.value, nil)))
	}
	var landed float64
	for _, v := range sentValues(te.server, "requests") {
		landed += v
	}
	assert.Equal(t, 21.0, landed, "10, then 5 and 6")
	assert.Equal(t, int64(1), te.counter(t, "points_dropped", "reason")["too_new"])
}

// The knobs reach the tracker: with max_age 1h a first point whose series
// started 2h ago is a baseline, one started 30m ago is counted whole.
func TestMaxAgeFromConfig(t *testing.T) {
	cfg := testConfig().CumulativeState
	cfg.MaxAge = time.Hour
	c := delta.NewConverter(cfg.trackerConfig())
	var d translate.DropCounts
	old := cumulativeSum(at(-2*time.Hour), at(0), 50, map[string]string{"s": "old"})
	convertInto(c, old, testNow, &d)
	assert.Zero(t, old.DataPointCount())
	assert.Equal(t, 1, d[translate.ReasonCumulativeBaseline])
	young := cumulativeSum(at(-30*time.Minute), at(0), 50, map[string]string{"s": "young"})
	convertInto(c, young, testNow, &d)
	v, ok := sumPoint(t, young)
	assert.True(t, ok)
	assert.Equal(t, int64(50), v)
}
