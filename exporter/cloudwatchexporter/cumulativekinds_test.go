// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/delta"
	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/translate"
	"github.com/gpubuild/otelcol-gpubuild/internal/cumulative"
)

// storedConverter is a converter over a disk, as one collector process sees it.
func storedConverter(t *testing.T, d *disk, walk bool, cfg CumulativeStateConfig, now time.Time) (*delta.Converter, delta.StateLoad) {
	t.Helper()
	ext := &diskStorage{disk: d, walk: walk}
	client, err := ext.GetClient(context.Background(), component.KindExporter, component.MustNewID("cloudwatch"), cumulativeStateStorageName)
	require.NoError(t, err)
	c := delta.NewConverter(cfg.trackerConfig())
	return c, c.AttachStorage(context.Background(), client, now)
}

// convertAndSave converts md and saves the state, as ConsumeMetrics does
// when the queue accepts the data.
func convertAndSave(t *testing.T, c *delta.Converter, md pmetric.Metrics, now time.Time) delta.Conversion {
	t.Helper()
	var cv delta.Conversion
	c.Convert(context.Background(), md, now, &cv)
	require.NoError(t, c.Save(context.Background(), cv.Records))
	return cv
}

func sumPoint(t *testing.T, md pmetric.Metrics) (int64, bool) {
	t.Helper()
	dps := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints()
	if dps.Len() == 0 {
		return 0, false
	}
	require.Equal(t, 1, dps.Len())
	return dps.At(0).IntValue(), true
}

func TestStateResetAfterRestart(t *testing.T) {
	for _, walk := range []bool{true, false} {
		d := newDisk()
		c, _ := storedConverter(t, d, walk, stateTestConfig, testNow)
		convertAndSave(t, c, cumulativeSum(at(-time.Hour), at(0), 100, nil), testNow)
		convertAndSave(t, c, cumulativeSum(at(-time.Hour), at(time.Minute), 130, nil), testNow)

		// Collector and service both restarted: a new start time, 3 since.
		c, _ = storedConverter(t, d, walk, stateTestConfig, testNow)
		md := cumulativeSum(at(90*time.Second), at(2*time.Minute), 3, nil)
		cv := convertAndSave(t, c, md, testNow)
		v, ok := sumPoint(t, md)
		require.True(t, ok)
		assert.Equal(t, int64(3), v, "walk=%v: the delta since the new start", walk)
		md = cumulativeSum(at(90*time.Second), at(3*time.Minute), 8, nil)
		convertAndSave(t, c, md, testNow)
		v, _ = sumPoint(t, md)
		assert.Equal(t, int64(5), v, "walk=%v", walk)
		assert.Zero(t, cv.Dropped.Total())
	}
}

func TestStateExpiredEntryIsAbsent(t *testing.T) {
	for _, walk := range []bool{true, false} {
		d := newDisk()
		c, _ := storedConverter(t, d, walk, stateTestConfig, testNow)
		convertAndSave(t, c, cumulativeSum(at(-time.Hour), at(0), 100, map[string]string{"s": "old"}), testNow)
		require.Len(t, d.keys(""), 2, "the series and the watermark")

		// The collector comes back after more than the TTL (30m).
		later := testNow.Add(45 * time.Minute)
		c, load := storedConverter(t, d, walk, stateTestConfig, later)
		if walk {
			assert.Equal(t, delta.StateLoad{Expired: 1, Listed: true}, load)
		}
		// The old series is forgotten as an eviction would: its next point
		// (same start, so it may already be counted) is a baseline ...
		md := cumulativeSum(at(-time.Hour), at(45*time.Minute), 160, map[string]string{"s": "old"})
		cv := convertAndSave(t, c, md, later)
		_, sent := sumPoint(t, md)
		assert.False(t, sent, "walk=%v", walk)
		assert.Equal(t, 1, cv.Dropped[translate.ReasonCumulativeBaseline])
		// ... and the one after is its delta: 175-160.
		md = cumulativeSum(at(-time.Hour), at(46*time.Minute), 175, map[string]string{"s": "old"})
		convertAndSave(t, c, md, later)
		v, _ := sumPoint(t, md)
		assert.Equal(t, int64(15), v, "walk=%v", walk)

		// A series that started after the forgotten point is new for sure:
		// its first point is its delta since start.
		md = cumulativeSum(at(40*time.Minute), at(46*time.Minute), 7, map[string]string{"s": "new"})
		convertAndSave(t, c, md, later)
		v, _ = sumPoint(t, md)
		assert.Equal(t, int64(7), v, "walk=%v", walk)
	}
}

func TestStateEvictionDeletesAndKeepsTheWatermark(t *testing.T) {
	d := newDisk()
	cfg := CumulativeStateConfig{TTL: time.Hour, MaxSeries: 1}
	c, _ := storedConverter(t, d, true, cfg, testNow)
	convertAndSave(t, c, cumulativeSum(at(-time.Hour), at(0), 10, map[string]string{"s": "a"}), testNow)
	aKeys := d.keys("")
	// A second series pushes "a" out (max_series 1): its entry goes.
	convertAndSave(t, c, cumulativeSum(at(-time.Hour), at(time.Minute), 20, map[string]string{"s": "b"}), testNow)
	bKeys := d.keys("")
	assert.Len(t, bKeys, 2)
	assert.NotEqual(t, aKeys, bKeys)

	// After a restart "a" comes back: it was forgotten at 0, its start is
	// before, so it is a baseline, not its total of 12 counted again.
	c, _ = storedConverter(t, d, true, cfg, testNow)
	md := cumulativeSum(at(-time.Hour), at(2*time.Minute), 12, map[string]string{"s": "a"})
	cv := convertAndSave(t, c, md, testNow)
	_, sent := sumPoint(t, md)
	assert.False(t, sent)
	assert.Equal(t, 1, cv.Dropped[translate.ReasonCumulativeBaseline])
}

func TestStateHistogramsSurviveARestart(t *testing.T) {
	for _, walk := range []bool{true, false} {
		d := newDisk()
		c, _ := storedConverter(t, d, walk, stateTestConfig, testNow)
		bounds := []float64{1, 10}
		convertAndSave(t, c, cumulativeHistogram(at(-time.Hour), at(0), bounds, []uint64{1, 2, 0}, 9, 0.5, 5), testNow)
		convertAndSave(t, c, cumulativeHistogram(at(-time.Hour), at(time.Minute), bounds, []uint64{1, 3, 1}, 32, 0.5, 20), testNow)

		// Restarted. Observed meanwhile: 0.3 (a new min) and 1.2.
		c, _ = storedConverter(t, d, walk, stateTestConfig, testNow)
		md := cumulativeHistogram(at(-time.Hour), at(2*time.Minute), bounds, []uint64{2, 4, 1}, 33.5, 0.3, 20)
		cv := convertAndSave(t, c, md, testNow)
		require.Zero(t, cv.Dropped.Total())
		dp := histogramPoints(md).At(0)
		assert.Equal(t, []uint64{1, 1, 0}, dp.BucketCounts().AsRaw(), "walk=%v", walk)
		assert.Equal(t, uint64(2), dp.Count())
		assert.Equal(t, 1.5, dp.Sum())
		assert.True(t, dp.HasMin())
		assert.Equal(t, 0.3, dp.Min())
		assert.False(t, dp.HasMax(), "the lifetime max did not move")
		assert.Equal(t, at(time.Minute), dp.StartTimestamp(), "the delta starts at the last point before the restart")
	}
}

func TestStateExponentialHistogramsSurviveARestart(t *testing.T) {
	exponential := func(ts time.Duration, counts, neg []uint64, zero uint64, sum float64) pmetric.Metrics {
		md := cumulativeExponential(at(-time.Hour), at(ts), 0, 1, counts, zero, sum)
		dp := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).ExponentialHistogram().DataPoints().At(0)
		dp.Negative().SetOffset(-1)
		dp.Negative().BucketCounts().FromRaw(neg)
		for _, n := range neg {
			dp.SetCount(dp.Count() + n)
		}
		return md
	}
	for _, walk := range []bool{true, false} {
		d := newDisk()
		c, _ := storedConverter(t, d, walk, stateTestConfig, testNow)
		// Scale 0, positive offset 1: (2,4], (4,8]; negative offset -1: [-1,-0.5).
		// 3 and 6, one zero, -0.7: count 4, sum 8.3.
		convertAndSave(t, c, exponential(0, []uint64{1, 1}, []uint64{1}, 1, 8.3), testNow)

		// Restarted. Observed meanwhile: 3, 10 (a new bucket (8,16]), a zero, -0.6.
		c, _ = storedConverter(t, d, walk, stateTestConfig, testNow)
		md := exponential(time.Minute, []uint64{2, 1, 1}, []uint64{2}, 2, 8.3+3+10-0.6)
		cv := convertAndSave(t, c, md, testNow)
		require.Zero(t, cv.Dropped.Total())
		dp := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).ExponentialHistogram().DataPoints().At(0)
		assert.Equal(t, int32(1), dp.Positive().Offset())
		assert.Equal(t, []uint64{1, 0, 1}, dp.Positive().BucketCounts().AsRaw(), "walk=%v", walk)
		assert.Equal(t, int32(-1), dp.Negative().Offset())
		assert.Equal(t, []uint64{1}, dp.Negative().BucketCounts().AsRaw())
		assert.Equal(t, uint64(1), dp.ZeroCount())
		assert.Equal(t, uint64(4), dp.Count())
		assert.InDelta(t, 12.4, dp.Sum(), 1e-9)
	}
}

func TestStateSummariesSurviveARestart(t *testing.T) {
	summary := func(ts time.Duration, count uint64, sum float64) pmetric.Metrics {
		md := pmetric.NewMetrics()
		dp := newMetric(md, "rpc.duration", "s").SetEmptySummary().DataPoints().AppendEmpty()
		dp.SetStartTimestamp(at(-time.Hour))
		dp.SetTimestamp(at(ts))
		dp.SetCount(count)
		dp.SetSum(sum)
		return md
	}
	for _, walk := range []bool{true, false} {
		d := newDisk()
		c, _ := storedConverter(t, d, walk, stateTestConfig, testNow)
		convertAndSave(t, c, summary(0, 4, 10), testNow)
		convertAndSave(t, c, summary(time.Minute, 6, 20), testNow)

		c, _ = storedConverter(t, d, walk, stateTestConfig, testNow)
		md := summary(2*time.Minute, 9, 35)
		convertAndSave(t, c, md, testNow)
		dp := histogramPoints(md).At(0)
		assert.Equal(t, uint64(3), dp.Count(), "walk=%v", walk)
		assert.Equal(t, 15.0, dp.Sum())
	}
}

func TestStateDoubleSumsSurviveARestart(t *testing.T) {
	double := func(ts time.Duration, v float64) pmetric.Metrics {
		md := pmetric.NewMetrics()
		s := newMetric(md, "energy", "J").SetEmptySum()
		s.SetIsMonotonic(true)
		s.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		dp := s.DataPoints().AppendEmpty()
		dp.SetStartTimestamp(at(-time.Hour))
		dp.SetTimestamp(at(ts))
		dp.SetDoubleValue(v)
		return md
	}
	d := newDisk()
	c, _ := storedConverter(t, d, true, stateTestConfig, testNow)
	convertAndSave(t, c, double(0, 1.25), testNow)
	c, _ = storedConverter(t, d, true, stateTestConfig, testNow)
	md := double(time.Minute, 4.0)
	convertAndSave(t, c, md, testNow)
	dp := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints().At(0)
	assert.Equal(t, 2.75, dp.DoubleValue())
}

func TestStateCorruptEntryIsABaseline(t *testing.T) {
	for _, walk := range []bool{true, false} {
		d := newDisk()
		c, _ := storedConverter(t, d, walk, stateTestConfig, testNow)
		convertAndSave(t, c, cumulativeSum(at(-time.Hour), at(0), 10, nil), testNow)
		keys := d.keys(cumulative.SeriesKeyPrefix)
		require.Len(t, keys, 1)
		d.data[keys[0]] = d.data[keys[0]][:4]
		c, load := storedConverter(t, d, walk, stateTestConfig, testNow)
		md := cumulativeSum(at(-time.Hour), at(time.Minute), 25, nil)
		cv := convertAndSave(t, c, md, testNow)
		_, sent := sumPoint(t, md)
		assert.False(t, sent, "walk=%v", walk)
		assert.Equal(t, 1, cv.Dropped[translate.ReasonCumulativeBaseline])
		assert.Equal(t, int64(1), load.ReadErrors+cv.ReadErrors)
		md = cumulativeSum(at(-time.Hour), at(2*time.Minute), 32, nil)
		convertAndSave(t, c, md, testNow)
		v, _ := sumPoint(t, md)
		assert.Equal(t, int64(7), v)
	}
}

func TestStateUnreadableWatermarkIsNow(t *testing.T) {
	d := newDisk()
	c, _ := storedConverter(t, d, true, stateTestConfig, testNow)
	convertAndSave(t, c, cumulativeSum(at(-time.Hour), at(0), 10, map[string]string{"s": "other"}), testNow)
	keys := d.keys(cumulative.WatermarkKey)
	require.Len(t, keys, 1)
	d.data[keys[0]] = []byte{99} // a format this version does not know

	c, load := storedConverter(t, d, true, stateTestConfig, testNow)
	assert.Equal(t, int64(1), load.ReadErrors)
	// Not restored and started before the restart: maybe counted already.
	md := cumulativeSum(at(-time.Hour), at(time.Minute), 25, nil)
	convertAndSave(t, c, md, testNow)
	_, sent := sumPoint(t, md)
	assert.False(t, sent)
	// Started after it: new for sure.
	md = cumulativeSum(at(time.Second), at(time.Minute), 4, map[string]string{"s": "new"})
	convertAndSave(t, c, md, testNow)
	v, _ := sumPoint(t, md)
	assert.Equal(t, int64(4), v)
}
