// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cumulative

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// A collector started after the service: the first point it sees has the
// service's start time, so everything since that start is counted.
func TestFirstPointCountedFromItsStart(t *testing.T) {
	c, _ := newObserved(testConfig)
	md := cumulativeSum(at(-10*time.Minute), at(0), 80, nil)
	r := convert(t, c, md, testNow)
	v, sent := sentSum(t, md)
	require.True(t, sent)
	assert.Equal(t, int64(80), v)
	assert.Zero(t, r.Dropped)
}

func TestFirstPointWithoutStartIsABaseline(t *testing.T) {
	c, _ := newObserved(testConfig)
	md := cumulativeSum(0, at(0), 80, nil)
	r := convert(t, c, md, testNow)
	_, sent := sentSum(t, md)
	assert.False(t, sent)
	assert.Equal(t, 1, r.Dropped[ReasonBaseline])
	md = cumulativeSum(0, at(time.Minute), 95, nil)
	convert(t, c, md, testNow)
	v, _ := sentSum(t, md)
	assert.Equal(t, int64(15), v)
}

// A sidecar added to a service running for longer than max_age does not
// send the service's whole history as one interval; it says so once per
// metric, however many series.
func TestFirstPointOlderThanMaxAgeIsABaseline(t *testing.T) {
	cfg := testConfig
	cfg.MaxAge = time.Hour
	c, logs := newObserved(cfg)
	for _, s := range []string{"a", "b", "c"} {
		md := cumulativeSum(at(-90*time.Minute), at(0), 1000, map[string]string{"s": s})
		r := convert(t, c, md, testNow)
		_, sent := sentSum(t, md)
		assert.False(t, sent, s)
		assert.Equal(t, 1, r.Dropped[ReasonStartTooOld], s)
	}
	assert.Equal(t, 1, logs.FilterMessageSnippet("max_age").FilterField(fieldString("metric", "requests")).Len())
	// The next point is a delta from that baseline.
	md := cumulativeSum(at(-90*time.Minute), at(time.Minute), 1010, map[string]string{"s": "a"})
	convert(t, c, md, testNow)
	v, _ := sentSum(t, md)
	assert.Equal(t, int64(10), v)
	// Within max_age: counted from the start.
	md = cumulativeSum(at(-59*time.Minute), at(0), 7, map[string]string{"s": "young"})
	convert(t, c, md, testNow)
	v, _ = sentSum(t, md)
	assert.Equal(t, int64(7), v)
}

func TestResets(t *testing.T) {
	c, _ := newObserved(testConfig)
	steps := []struct {
		start time.Duration
		ts    time.Duration
		value int64
		want  int64
	}{
		{-time.Minute, 0, 10, 10},
		{-time.Minute, time.Minute, 25, 15},
		{time.Minute + time.Second, 2 * time.Minute, 4, 4}, // new start time: counted since it
		{time.Minute + time.Second, 3 * time.Minute, 9, 5},
		{time.Minute + time.Second, 4 * time.Minute, 2, 2}, // same start, value fell: a reset
	}
	for i, s := range steps {
		md := cumulativeSum(at(s.start), at(s.ts), s.value, nil)
		convert(t, c, md, testNow.Add(s.ts))
		v, sent := sentSum(t, md)
		require.True(t, sent, "step %d", i)
		assert.Equal(t, s.want, v, "step %d", i)
	}
}

// A point stamped hours ahead never becomes the series' last value: the
// series goes on with its next good point, and the refusal is counted and
// warned about once.
func TestPointFromTheFutureIsRefusedForItsSeries(t *testing.T) {
	c, logs := newObserved(testConfig)
	start := at(-time.Hour)
	convert(t, c, cumulativeSum(start, at(0), 10, nil), testNow)

	for i := range 3 {
		md := cumulativeSum(start, at(3*time.Hour+time.Duration(i)*time.Minute), 1000, nil)
		r := convert(t, c, md, testNow.Add(time.Duration(i)*time.Second))
		_, sent := sentSum(t, md)
		assert.False(t, sent)
		assert.Equal(t, 1, r.Dropped[ReasonFuture])
		assert.Empty(t, r.Records, "the series did not move")
	}
	assert.Equal(t, 1, logs.FilterMessageSnippet("future").Len(), "rate-limited")

	md := cumulativeSum(start, at(time.Minute), 15, nil)
	convert(t, c, md, testNow.Add(time.Minute))
	v, sent := sentSum(t, md)
	require.True(t, sent)
	assert.Equal(t, int64(5), v)

	// Just within the tolerance is a normal point.
	md = cumulativeSum(start, at(time.Minute+4*time.Minute), 18, nil)
	convert(t, c, md, testNow.Add(time.Minute))
	v, _ = sentSum(t, md)
	assert.Equal(t, int64(3), v)
}

// The first point of a series stamped in the future is not its baseline
// either: its first good point is counted from its start.
func TestFirstPointFromTheFutureIsNoBaseline(t *testing.T) {
	c, _ := newObserved(testConfig)
	md := cumulativeSum(at(-time.Minute), at(3*time.Hour), 500, nil)
	r := convert(t, c, md, testNow)
	assert.Equal(t, 1, r.Dropped[ReasonFuture])
	assert.Zero(t, c.Len())
	md = cumulativeSum(at(-time.Minute), at(0), 20, nil)
	convert(t, c, md, testNow)
	v, sent := sentSum(t, md)
	require.True(t, sent)
	assert.Equal(t, int64(20), v)
}

// At the cap, a flood of new series evicts the least recently updated ones;
// a neighbour updated every round keeps every increment.
func TestCapEvictsTheLeastRecentlyUpdated(t *testing.T) {
	cfg := testConfig
	cfg.MaxSeries = 10
	c, logs := newObserved(cfg)
	start := at(-time.Hour)
	var neighbour int64
	var evictions int64
	for round := 1; round <= 20; round++ {
		now := testNow.Add(time.Duration(round) * time.Second)
		md := cumulativeSum(start, pcommon.NewTimestampFromTime(now), int64(7*round), map[string]string{"s": "neighbour"})
		convert(t, c, md, now)
		if v, ok := sentSum(t, md); ok {
			neighbour += v
		}
		for i := range 5 {
			flood := cumulativeSum(pcommon.NewTimestampFromTime(now), pcommon.NewTimestampFromTime(now), 1,
				map[string]string{"s": fmt.Sprintf("job-%d-%d", round, i)})
			evictions += convert(t, c, flood, now).Evictions
		}
	}
	assert.Equal(t, int64(7*20), neighbour, "every increment of the neighbour")
	assert.Equal(t, 10, c.Len())
	assert.Equal(t, int64(1+20*5-10), evictions)
	assert.Equal(t, 1, logs.FilterMessageSnippet("evicted").Len(), "rate-limited")
}

func TestCountIsTheIncrementOfACumulativeCount(t *testing.T) {
	c, _ := newObserved(testConfig)
	attrs := pcommon.NewMap()
	attrs.PutStr("http.route", "/_build")
	id := NewMetricID(pcommon.NewMap(), "", "", "http.server.request.duration", pmetric.MetricTypeHistogram).Series(attrs)
	other := NewMetricID(pcommon.NewMap(), "", "", "http.server.request.duration", pmetric.MetricTypeHistogram).Series(pcommon.NewMap())
	require.NotEqual(t, id, other)
	start := at(-time.Minute)
	ctx := context.Background()
	steps := []struct {
		start, ts pcommon.Timestamp
		count     uint64
		want      uint64
		ok        bool
		reason    Reason
	}{
		{start, at(0), 5, 5, true, 0},                // late start: counted from start
		{start, at(0), 5, 0, false, ReasonDuplicate}, // the same point again adds nothing
		{start, at(time.Minute), 12, 7, true, 0},     // increment
		{start, at(30 * time.Second), 9, 0, false, ReasonOutOfOrder},
		{start, at(4 * time.Hour), 900, 0, false, ReasonFuture}, // never the last value
		{start, at(2 * time.Minute), 13, 1, true, 0},
		{at(2*time.Minute + time.Second), at(3 * time.Minute), 2, 2, true, 0}, // service restarted
	}
	for i, s := range steps {
		var r Result
		got, ok := c.Count(ctx, id, "http.server.request.duration", s.start, s.ts, s.count, testNow, &r)
		assert.Equal(t, s.want, got, "step %d", i)
		assert.Equal(t, s.ok, ok, "step %d", i)
		if !s.ok {
			assert.Equal(t, 1, r.Dropped[s.reason], "step %d", i)
		}
	}
}

func fieldString(key, value string) zapField { return zapString(key, value) }
