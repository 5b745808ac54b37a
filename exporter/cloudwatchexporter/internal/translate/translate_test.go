// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package translate

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

func TestTranslateGauge(t *testing.T) {
	md := gaugeMetrics("gpu.utilization", "1", 0.75)
	dp := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Gauge().DataPoints().At(0)
	dp.Attributes().PutStr("gpu.uuid", "GPU-1")

	tr := translateAll(testConfig(), md)
	require.Len(t, tr.Datums, 1)
	d := tr.Datums[0]
	assert.Equal(t, "gpu.utilization", d.Name)
	assert.Equal(t, types.StandardUnitNone, d.Unit.standard())
	assert.Equal(t, KindValue, d.Kind)
	assert.Equal(t, 0.75, d.Value)
	assert.Equal(t, at(0), d.Timestamp)
	assert.Equal(t, int32(60), d.Resolution)
	// service.instance.id is on the resource but not a dimension by default.
	assert.Equal(t, []Dimension{{"gpu.uuid", "GPU-1"}, {"service.name", "svc"}}, d.Dims)
	assert.Equal(t, PointRef{0, 0, 0, 0}, tr.Points[d.Point])
}

func TestTranslateIntGaugeAndSums(t *testing.T) {
	md := pmetric.NewMetrics()
	g := newMetric(md, "ints", "{thing}").SetEmptyGauge().DataPoints().AppendEmpty()
	g.SetTimestamp(at(0))
	g.SetIntValue(-7)

	delta := newMetric(md, "delta", "{request}").SetEmptySum()
	delta.SetIsMonotonic(true)
	delta.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	dp := delta.DataPoints().AppendEmpty()
	dp.SetTimestamp(at(0))
	dp.SetIntValue(12)

	upDown := newMetric(md, "queue.depth", "{job}").SetEmptySum()
	upDown.SetIsMonotonic(false)
	upDown.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	dp = upDown.DataPoints().AppendEmpty()
	dp.SetTimestamp(at(0))
	dp.SetIntValue(3)

	tr := translateAll(testConfig(), md)
	require.Len(t, tr.Datums, 3)
	assert.Equal(t, -7.0, tr.Datums[0].Value)
	assert.Equal(t, types.StandardUnitCount, tr.Datums[0].Unit.standard())
	assert.Equal(t, 12.0, tr.Datums[1].Value, "a delta sum is sent as its value")
	assert.Equal(t, 3.0, tr.Datums[2].Value, "an up-down counter is sent as its current value")
	assert.Zero(t, tr.Dropped.Total())
}

func TestTranslateUnits(t *testing.T) {
	tests := []struct {
		ucum  string
		value float64
		unit  types.StandardUnit
		want  float64
	}{
		{"s", 2, types.StandardUnitSeconds, 2},
		{"ms", 2, types.StandardUnitMilliseconds, 2},
		{"us", 2, types.StandardUnitMicroseconds, 2},
		{"ns", 2500, types.StandardUnitMicroseconds, 2.5},
		{"min", 2, types.StandardUnitSeconds, 120},
		{"h", 1, types.StandardUnitSeconds, 3600},
		{"By", 10, types.StandardUnitBytes, 10},
		{"KiBy", 10, types.StandardUnitKilobytes, 10},
		{"MiBy", 10, types.StandardUnitMegabytes, 10},
		{"GiBy", 10, types.StandardUnitGigabytes, 10},
		{"bit", 10, types.StandardUnitBits, 10},
		{"By/s", 10, types.StandardUnitBytesSecond, 10},
		{"%", 50, types.StandardUnitPercent, 50},
		{"1", 0.5, types.StandardUnitNone, 0.5},
		{"{request}", 3, types.StandardUnitCount, 3},
		{"{packet}/s", 3, types.StandardUnitCountSecond, 3},
		{"", 3, types.StandardUnitNone, 3},
		{"Cel", 3, types.StandardUnitNone, 3},
		{"{a}{b}", 3, types.StandardUnitNone, 3},
	}
	for _, tt := range tests {
		t.Run(tt.ucum, func(t *testing.T) {
			tr := translateAll(testConfig(), gaugeMetrics("m", tt.ucum, tt.value))
			require.Len(t, tr.Datums, 1)
			assert.Equal(t, tt.unit, tr.Datums[0].Unit.standard())
			assert.Equal(t, tt.want, tr.Datums[0].Value)
		})
	}
}

func TestTranslateExplicitHistogramIsExact(t *testing.T) {
	// Six observations: 1 and one more in (0,10], three in (10,100], 400 in
	// (100,+inf); sum 500, min 1, max 400.
	md := pmetric.NewMetrics()
	h := newMetric(md, "latency", "ms").SetEmptyHistogram()
	h.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	dp := h.DataPoints().AppendEmpty()
	dp.SetTimestamp(at(0))
	fillHistogram(dp, []float64{0, 10, 100}, []uint64{0, 2, 3, 1}, 500)
	dp.SetMin(1)
	dp.SetMax(400)

	tr := translateAll(testConfig(), md)
	require.Len(t, tr.Datums, 1)
	d := tr.Datums[0]
	assert.Equal(t, KindValues, d.Kind)
	assert.Equal(t, types.StandardUnitMilliseconds, d.Unit.standard())

	// By hand: min (1) and max (400) are values of their own; 99 is left for
	// one observation in [1,10] and three in [10,100]. The midpoints 5.5 and
	// 55 give 170.5, 71.5 too much; the room downwards is 1*4.5 + 3*45 =
	// 139.5, so both move down by f = 71.5/139.5 of their room.
	f := 71.5 / 139.5
	wantValues := []float64{1, 5.5 - f*4.5, 55 - f*45, 400}
	require.Len(t, d.Values(), 4)
	for i := range wantValues {
		assert.InDelta(t, wantValues[i], d.Values()[i], 1e-12)
	}
	assert.Equal(t, []float64{1, 1, 3, 1}, d.Counts())

	st := cloudWatchStatistics(tr.Datums)
	assert.Equal(t, 6.0, st.SampleCount)
	assert.InDelta(t, 500, st.Sum, 1e-9)
	assert.Equal(t, 1.0, st.Min)
	assert.Equal(t, 400.0, st.Max)
}

func TestTranslateHistogramWithoutMinMax(t *testing.T) {
	// (-inf,10]:1, (10,20]:2, (20,+inf):1, sum 50. Starting points 10, 15,
	// 20 give 60; the open first bucket takes the -10: its value becomes 0.
	md := pmetric.NewMetrics()
	h := newMetric(md, "h", "s").SetEmptyHistogram()
	h.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	dp := h.DataPoints().AppendEmpty()
	dp.SetTimestamp(at(0))
	fillHistogram(dp, []float64{10, 20}, []uint64{1, 2, 1}, 50)

	tr := translateAll(testConfig(), md)
	require.Len(t, tr.Datums, 1)
	assert.Equal(t, []float64{0, 15, 20}, tr.Datums[0].Values())
	assert.Equal(t, []float64{1, 2, 1}, tr.Datums[0].Counts())
}

// deltaExponentialPoint adds the delta exponential histogram "e" (seconds)
// to md and returns its one data point, stamped at(0).
func deltaExponentialPoint(md pmetric.Metrics) pmetric.ExponentialHistogramDataPoint {
	h := newMetric(md, "e", "s").SetEmptyExponentialHistogram()
	h.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	dp := h.DataPoints().AppendEmpty()
	dp.SetTimestamp(at(0))
	return dp
}

func TestTranslateExponentialHistogramIsExact(t *testing.T) {
	// Observations -3, 0, 1.5, 3, 4 at scale 0 (base 2): -3 in bucket -1
	// (index 1 of the negative side: (-4,-2]), 0 in the zero bucket, 1.5 in
	// (1,2] (index 0), 3 and 4 in (2,4] (index 1).
	md := pmetric.NewMetrics()
	dp := deltaExponentialPoint(md)
	dp.SetScale(0)
	dp.SetCount(5)
	dp.SetSum(5.5)
	dp.SetMin(-3)
	dp.SetMax(4)
	dp.SetZeroCount(1)
	dp.Negative().SetOffset(1)
	dp.Negative().BucketCounts().FromRaw([]uint64{1})
	dp.Positive().SetOffset(0)
	dp.Positive().BucketCounts().FromRaw([]uint64{1, 2})

	tr := translateAll(testConfig(), md)
	require.Len(t, tr.Datums, 1)
	// min and max are taken out; the rest (0, [1,2], [2,4] once each) sums to
	// 4.5 at the midpoints already.
	assert.Equal(t, []float64{-3, 0, 1.5, 3, 4}, tr.Datums[0].Values())
	assert.Equal(t, []float64{1, 1, 1, 1, 1}, tr.Datums[0].Counts())
	st := cloudWatchStatistics(tr.Datums)
	assert.Equal(t, StatisticSet{SampleCount: 5, Sum: 5.5, Min: -3, Max: 4}, st)
}

// A bucket wholly beyond float64 (index 1 at scale -10 starts at 2^1024)
// has no value to send: the point is dropped as out of CloudWatch's range,
// as one past 2^360 is. Sent, it became the point's mean, out of order
// with the other values and repeating one of them, and CloudWatch rejected
// the whole request, other metrics' datums with it.
func TestTranslateExponentialBucketBeyondFloat64IsOutOfRange(t *testing.T) {
	for name, side := range map[string]func(dp pmetric.ExponentialHistogramDataPoint) pmetric.ExponentialHistogramDataPointBuckets{
		"positive": pmetric.ExponentialHistogramDataPoint.Positive,
		"negative": pmetric.ExponentialHistogramDataPoint.Negative,
	} {
		t.Run(name, func(t *testing.T) {
			md := pmetric.NewMetrics()
			dp := deltaExponentialPoint(md)
			dp.SetScale(-10)
			dp.SetCount(6)
			dp.SetSum(12)
			dp.SetZeroCount(3)
			dp.SetZeroThreshold(2)
			side(dp).SetOffset(0)
			side(dp).BucketCounts().FromRaw([]uint64{2, 1})
			g := newMetric(md, "beside", "1").SetEmptyGauge().DataPoints().AppendEmpty()
			g.SetTimestamp(at(0))
			g.SetDoubleValue(7)

			tr := translateAll(testConfig(), md)
			require.Len(t, tr.Datums, 1, "only the gauge")
			assert.Equal(t, "beside", tr.Datums[0].Name)
			assert.Equal(t, 1, tr.Dropped[reasonOutOfRange])
		})
	}
}

// An inconsistent point whose zero bucket overlaps its first buckets (zero
// threshold 2, buckets in (1, 1.41]) gave the value 2 twice, and CloudWatch
// rejected the whole request. Values are now ascending and distinct.
func TestTranslateOverlappingBucketsGiveDistinctValues(t *testing.T) {
	md := pmetric.NewMetrics()
	dp := deltaExponentialPoint(md)
	dp.SetScale(2)
	dp.SetZeroThreshold(2)
	dp.SetZeroCount(3)
	dp.Positive().BucketCounts().FromRaw([]uint64{1, 1})
	dp.Negative().BucketCounts().FromRaw([]uint64{1})
	dp.SetCount(6)
	dp.SetSum(5)
	dp.SetMin(-32)
	dp.SetMax(2)

	tr := translateAll(testConfig(), md)
	require.Len(t, tr.Datums, 1)
	values := tr.Datums[0].Values()
	for i := 1; i < len(values); i++ {
		require.Less(t, values[i-1], values[i], "values %v", values)
	}
	// The sum cannot be met (min -32 and five more at most 2 each); the
	// rest is the point's.
	st := cloudWatchStatistics(tr.Datums)
	assert.Equal(t, 6.0, st.SampleCount)
	assert.Equal(t, -32.0, st.Min)
	assert.Equal(t, 2.0, st.Max)
}

func TestTranslateSplitsAt150Values(t *testing.T) {
	// 399 bounds 1..399 make 400 buckets with one observation each.
	bounds := make([]float64, 399)
	counts := make([]uint64, 400)
	for i := range bounds {
		bounds[i] = float64(i + 1)
	}
	for i := range counts {
		counts[i] = 1
	}
	md := pmetric.NewMetrics()
	h := newMetric(md, "wide", "s").SetEmptyHistogram()
	h.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	dp := h.DataPoints().AppendEmpty()
	dp.SetTimestamp(at(0))
	dp.Attributes().PutStr("stage", "upload")
	fillHistogram(dp, bounds, counts, 80_500)
	dp.SetMin(0.5)
	dp.SetMax(1000)

	tr := translateAll(testConfig(), md)
	require.Len(t, tr.Datums, 3)
	assert.Len(t, tr.Datums[0].Values(), 150)
	assert.Len(t, tr.Datums[1].Values(), 150)
	assert.Len(t, tr.Datums[2].Values(), 100)
	for _, d := range tr.Datums {
		assert.Equal(t, tr.Datums[0].Dims, d.Dims)
		assert.Equal(t, tr.Datums[0].Timestamp, d.Timestamp)
		assert.Equal(t, tr.Datums[0].Point, d.Point, "one data point")
		assert.Len(t, d.Counts(), len(d.Values()))
	}
	st := cloudWatchStatistics(tr.Datums)
	assert.Equal(t, 400.0, st.SampleCount)
	assert.InDelta(t, 80_500, st.Sum, 1e-7)
	assert.Equal(t, 0.5, st.Min)
	assert.Equal(t, 1000.0, st.Max)
}

func TestTranslateBucketlessHistogramAsStatistics(t *testing.T) {
	md := pmetric.NewMetrics()
	h := newMetric(md, "h", "s").SetEmptyHistogram()
	h.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	withMinMax := h.DataPoints().AppendEmpty()
	withMinMax.SetTimestamp(at(0))
	withMinMax.SetCount(4)
	withMinMax.SetSum(10)
	withMinMax.SetMin(1)
	withMinMax.SetMax(4)
	withoutMinMax := h.DataPoints().AppendEmpty()
	withoutMinMax.SetTimestamp(at(0))
	withoutMinMax.SetCount(4)
	withoutMinMax.SetSum(10)
	empty := h.DataPoints().AppendEmpty()
	empty.SetTimestamp(at(0))

	tr := translateAll(testConfig(), md)
	require.Len(t, tr.Datums, 2, "a histogram with no observations sends nothing")
	assert.Equal(t, KindStatistics, tr.Datums[0].Kind)
	assert.Equal(t, StatisticSet{SampleCount: 4, Sum: 10, Min: 1, Max: 4}, tr.Datums[0].Stats())
	assert.Equal(t, StatisticSet{SampleCount: 4, Sum: 10, Min: 2.5, Max: 2.5}, tr.Datums[1].Stats())
	assert.Zero(t, tr.Dropped.Total())
}

func TestTranslateDropsBadPointsOnly(t *testing.T) {
	md := pmetric.NewMetrics()
	dps := newMetric(md, "g", "").SetEmptyGauge().DataPoints()
	add := func(v float64, when time.Duration) {
		dp := dps.AppendEmpty()
		dp.SetTimestamp(at(when))
		dp.SetDoubleValue(v)
	}
	add(1, 0)                           // kept
	add(math.NaN(), 0)                  // nan_or_inf
	add(math.Inf(1), 0)                 // nan_or_inf
	add(math.Inf(-1), 0)                // nan_or_inf
	add(1e200, 0)                       // out_of_range (above 2^360)
	add(-1e-200, 0)                     // out_of_range (below 2^-360)
	add(2, -15*24*time.Hour)            // too_old
	add(3, 3*time.Hour)                 // too_new
	add(4, -13*24*time.Hour)            // kept: inside the two weeks
	add(5, 90*time.Minute)              // kept: inside the two hours
	dps.AppendEmpty().SetDoubleValue(6) // no timestamp: too_old

	h := newMetric(md, "h", "").SetEmptyHistogram()
	h.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	bad := h.DataPoints().AppendEmpty()
	bad.SetTimestamp(at(0))
	bad.ExplicitBounds().FromRaw([]float64{1, 2})
	bad.BucketCounts().FromRaw([]uint64{1, 1}) // one count short of the bounds: invalid
	bad.SetCount(2)
	nanSum := h.DataPoints().AppendEmpty()
	nanSum.SetTimestamp(at(0))
	fillHistogram(nanSum, []float64{1}, []uint64{1, 1}, math.NaN()) // nan_or_inf
	minAboveMax := h.DataPoints().AppendEmpty()
	minAboveMax.SetTimestamp(at(0))
	fillHistogram(minAboveMax, []float64{1}, []uint64{1, 1}, 3)
	minAboveMax.SetMin(5)
	minAboveMax.SetMax(1) // invalid

	cfg := testConfig()
	cfg.Rules = []Rule{{Match: "debug.*", Drop: true}}
	dbg := newMetric(md, "debug.things", "").SetEmptyGauge().DataPoints()
	dbg.AppendEmpty().SetTimestamp(at(0))
	dbg.AppendEmpty().SetTimestamp(at(0)) // two points: rule

	blank := newMetric(md, "  ", "").SetEmptyGauge().DataPoints()
	blank.AppendEmpty().SetTimestamp(at(0)) // invalid name

	tr := translateAll(cfg, md)
	var kept []float64
	for _, d := range tr.Datums {
		kept = append(kept, d.Value)
	}
	assert.Equal(t, []float64{1, 4, 5}, kept)
	var want DropCounts
	want[reasonNaNOrInf] = 4
	want[reasonOutOfRange] = 2
	want[reasonTooOld] = 2
	want[ReasonTooNew] = 1
	want[reasonInvalid] = 3
	want[reasonRule] = 2
	assert.Equal(t, want, tr.Dropped)
}

func TestTranslateRules(t *testing.T) {
	cfg := testConfig()
	cfg.Rules = []Rule{
		{Match: "gpu.utilization", Unit: "Percent", StorageResolution: 1},
		{Match: "indexbuild.*", Rename: "BuildDuration", IncludeDimensions: []string{"stage"}},
		{Match: "indexbuild.stage.duration", Rename: "never used: the rule before matches first"},
		{Match: "process.*", ExcludeDimensions: []string{"process.pid"}},
	}
	md := pmetric.NewMetrics()
	addGauge := func(name string, attrs map[string]string) {
		dp := newMetric(md, name, "s").SetEmptyGauge().DataPoints().AppendEmpty()
		dp.SetTimestamp(at(0))
		dp.SetDoubleValue(1)
		for k, v := range attrs {
			dp.Attributes().PutStr(k, v)
		}
	}
	addGauge("gpu.utilization", nil)
	addGauge("indexbuild.stage.duration", map[string]string{"stage": "upload", "job": "j1"})
	addGauge("process.cpu", map[string]string{"process.pid": "42", "mode": "user"})
	addGauge("other", nil)

	tr := translateAll(cfg, md)
	require.Len(t, tr.Datums, 4)
	assert.Equal(t, types.StandardUnitPercent, tr.Datums[0].Unit.standard())
	assert.Equal(t, int32(1), tr.Datums[0].Resolution)

	assert.Equal(t, "BuildDuration", tr.Datums[1].Name)
	assert.Equal(t, []Dimension{{"stage", "upload"}}, tr.Datums[1].Dims, "include keeps only listed names, resource ones too")

	assert.Equal(t, "process.cpu", tr.Datums[2].Name)
	assert.Equal(t, []Dimension{{"mode", "user"}, {"service.name", "svc"}}, tr.Datums[2].Dims)

	assert.Equal(t, "other", tr.Datums[3].Name)
	assert.Equal(t, types.StandardUnitSeconds, tr.Datums[3].Unit.standard())
	assert.Equal(t, int32(60), tr.Datums[3].Resolution)
}

func TestTranslateCumulativeNeedsConversion(t *testing.T) {
	// translate only sees data that passed through the deltaConverter; a
	// cumulative sum that did not is counted, not sent as a wrong value.
	md := cumulativeSum(at(-time.Minute), at(0), 5, nil)
	tr := translateAll(testConfig(), md)
	assert.Empty(t, tr.Datums)
	assert.Equal(t, 1, tr.Dropped[reasonInvalid])
}

func TestTranslateLongMetricName(t *testing.T) {
	name := strings.Repeat("é", 200) // 400 bytes
	tr := translateAll(testConfig(), gaugeMetrics(name, "", 1))
	require.Len(t, tr.Datums, 1)
	assert.Equal(t, strings.Repeat("é", 127), tr.Datums[0].Name, "cut to 255 bytes on a character boundary")
}
