// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cumulative

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// seriesBatch is one "requests" sum with a point per name, each at value.
func seriesBatch(names []string, start, ts pcommon.Timestamp, value int64) pmetric.Metrics {
	md := pmetric.NewMetrics()
	sum := newMetric(md, "requests", "{request}").SetEmptySum()
	sum.SetIsMonotonic(true)
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	for _, n := range names {
		dp := sum.DataPoints().AppendEmpty()
		dp.SetStartTimestamp(start)
		dp.SetTimestamp(ts)
		dp.SetIntValue(value)
		dp.Attributes().PutStr("s", n)
	}
	return md
}

// sentPerSeries adds the sent deltas of md to totals, by series name.
func sentPerSeries(md pmetric.Metrics, totals map[string]int64) {
	dps := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints()
	for i := range dps.Len() {
		name, _ := dps.At(i).Attributes().Get("s")
		totals[name.Str()] += dps.At(i).IntValue()
	}
}

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// More new series in one interval than the cap (60,000 against 50,000),
// three intervals running, beside 100 neighbour series updated every
// interval: the flood churns through the series seen once, the neighbours
// keep their place and every increment. Half of each flood arrives before
// the neighbours' points, half after.
func TestFloodBeyondTheCapKeepsEstablishedNeighbours(t *testing.T) {
	cfg := testConfig
	cfg.MaxSeries = DefaultMaxSeries
	c, logs := newObserved(cfg)
	start := at(-time.Hour)
	neighbours := names("neighbour", 100)
	const flood = 60_000
	totals := map[string]int64{}
	var evictions int64
	var value int64
	for interval := 1; interval <= 5; interval++ {
		now := testNow.Add(time.Duration(interval) * time.Minute)
		ts := pcommon.NewTimestampFromTime(now)
		var before, after []string
		if interval >= 3 {
			jobs := names(fmt.Sprintf("job-%d", interval), flood)
			before, after = jobs[:flood/2], jobs[flood/2:]
		}
		evictions += convert(t, c, seriesBatch(before, ts, ts, 1), now).Evictions
		value += int64(interval)
		md := seriesBatch(neighbours, start, ts, value)
		r := convert(t, c, md, now)
		evictions += r.Evictions
		assert.Zero(t, r.Dropped, "interval %d: no neighbour point is a baseline", interval)
		sentPerSeries(md, totals)
		evictions += convert(t, c, seriesBatch(after, ts, ts, 1), now).Evictions
	}
	for _, n := range neighbours {
		require.Equal(t, value, totals[n], "%s: every increment", n)
	}
	assert.Equal(t, DefaultMaxSeries, c.Len())
	assert.Equal(t, int64(3*flood+len(neighbours)-DefaultMaxSeries), evictions, "only flood series were evicted")
	assert.Equal(t, 1, logs.FilterMessageSnippet("evicted").Len(), "rate-limited")
}

// A full table of established series, some idle for longer than a third of
// the TTL: a new series replaces an idle one, so that series come and go at
// the cap instead of new ones evicting each other until the TTL.
func TestIdleEstablishedSeriesMakeRoomForNewOnes(t *testing.T) {
	cfg := testConfig
	cfg.MaxSeries = 4
	c, _ := newObserved(cfg)
	start := at(-time.Hour)
	t0 := testNow
	idle, busy := names("idle", 2), names("busy", 2)
	for i, now := range []time.Time{t0, t0.Add(time.Minute)} {
		ts := pcommon.NewTimestampFromTime(now)
		convert(t, c, seriesBatch(append(append([]string(nil), idle...), busy...), start, ts, int64(i+1)), now)
	}
	now := t0.Add(time.Minute + cfg.TTL/3 + time.Second)
	ts := pcommon.NewTimestampFromTime(now)
	convert(t, c, seriesBatch(busy, start, ts, 3), now)
	// Two new series, each seen twice: both become established, taking the
	// idle series' places rather than each other's.
	for i, at := range []time.Time{now, now.Add(time.Second)} {
		ts := pcommon.NewTimestampFromTime(at)
		convert(t, c, seriesBatch([]string{"new-0"}, start, ts, int64(10+i)), at)
		md := seriesBatch([]string{"new-1"}, start, ts, int64(20+i))
		convert(t, c, md, at)
		if i == 1 {
			v, sent := sentSum(t, md)
			require.True(t, sent, "new-1 kept its first point")
			assert.Equal(t, int64(1), v)
		}
	}
	assert.Equal(t, 4, c.Len())
	for _, n := range busy {
		md := seriesBatch([]string{n}, start, pcommon.NewTimestampFromTime(now.Add(2*time.Second)), 4)
		convert(t, c, md, now.Add(2*time.Second))
		v, sent := sentSum(t, md)
		require.True(t, sent, n)
		assert.Equal(t, int64(1), v, "%s kept its place", n)
	}
}
