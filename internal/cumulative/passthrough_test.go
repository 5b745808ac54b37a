// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cumulative

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// An SDK's two exports reaching the collector out of order: Accumulate
// passes each cumulative point that is not older than its series' last one
// as it is, and removes the older one (counted), for sums and histograms
// alike; another series is not held back by it. The same point again
// passes: a client sends a refused request again, and the stores that
// refused it need it.
func TestAccumulatePassesCumulativePointsInOrderOnly(t *testing.T) {
	c := New(testConfig, nil)
	pass := func(md pmetric.Metrics, ts time.Duration) (int, Result) {
		var r Result
		c.Accumulate(context.Background(), md, testNow.Add(ts), &r)
		m := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0)
		if m.Type() == pmetric.MetricTypeHistogram {
			require.Equal(t, pmetric.AggregationTemporalityCumulative, m.Histogram().AggregationTemporality())
			return m.Histogram().DataPoints().Len(), r
		}
		require.Equal(t, pmetric.AggregationTemporalityCumulative, m.Sum().AggregationTemporality())
		return m.Sum().DataPoints().Len(), r
	}
	steps := []struct {
		md     pmetric.Metrics
		ts     time.Duration
		passed int
		reason Reason
	}{
		{cumulativeSum(at(0), at(20*time.Second), 8, nil), 20 * time.Second, 1, 0},
		{cumulativeSum(at(0), at(10*time.Second), 5, nil), 21 * time.Second, 0, ReasonOutOfOrder}, // overtaken
		{cumulativeSum(at(0), at(20*time.Second), 8, nil), 22 * time.Second, 1, 0},                // sent again
		{cumulativeSum(at(0), at(30*time.Second), 9, map[string]string{"route": "/b"}), 30 * time.Second, 1, 0},
		{cumulativeSum(at(0), at(30*time.Second), 9, nil), 30 * time.Second, 1, 0},
		{cumulativeHistogram(at(0), at(20*time.Second), []float64{1}, []uint64{1, 2}, 3), 30 * time.Second, 1, 0},
		{cumulativeHistogram(at(0), at(15*time.Second), []float64{1}, []uint64{1, 1}, 2), 31 * time.Second, 0, ReasonOutOfOrder},
	}
	for i, s := range steps {
		n, r := pass(s.md, s.ts)
		assert.Equal(t, s.passed, n, "step %d: points passed", i)
		if s.passed == 0 {
			assert.Equal(t, 1, r.Dropped[s.reason], "step %d: dropped as %v", i, s.reason)
		} else {
			assert.Zero(t, r.Dropped, "step %d", i)
		}
	}
}

// The memory of passed series is bounded: past MaxSeries new series pass
// unchecked, and a series not seen for the TTL is forgotten.
func TestPassedSeriesAreBounded(t *testing.T) {
	cfg := testConfig
	cfg.MaxSeries = 2
	c := New(cfg, nil)
	var r Result
	for i, route := range []string{"/a", "/b", "/c"} {
		c.Accumulate(context.Background(), cumulativeSum(at(0), at(10*time.Second), int64(i), map[string]string{"route": route}), testNow, &r)
	}
	assert.Len(t, c.passed.last, 2)
	later := testNow.Add(cfg.TTL + time.Minute)
	c.Accumulate(context.Background(), cumulativeSum(at(0), at(cfg.TTL+time.Minute), 1, map[string]string{"route": "/d"}), later, &r)
	assert.Len(t, c.passed.last, 1, "the three older series forgotten after the TTL")
	assert.Zero(t, r.Dropped)
}
