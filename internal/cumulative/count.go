// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cumulative // import "github.com/gpubuild/otelcol-gpubuild/internal/cumulative"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// MetricID identifies a metric: resource, scope, name and type.
type MetricID uint64

// SeriesID identifies one series of a metric (its point attributes). It is
// saved with the state, so it is stable across processes and versions.
type SeriesID uint64

// NewMetricID is the identity of a metric. Convert uses the same identity,
// so a caller using Count with the metric's own type shares its series.
func NewMetricID(resource pcommon.Map, scopeName, scopeVersion, metricName string, typ pmetric.MetricType) MetricID {
	return MetricID(mix(hashMap(resource), hashStrings(scopeName, scopeVersion), hashStrings(metricName, ""), uint64(typ)))
}

// Series is the identity of the series of m with these point attributes.
func (m MetricID) Series(attrs pcommon.Map) SeriesID {
	return SeriesID(mix(uint64(m), hashMap(attrs)))
}

// Count returns the increment of a cumulative count (a histogram's count, a
// monotonic counter) since the last point of series id, under the same
// rules as Convert, except that the same point twice adds nothing the
// second time: the first point counts from its start when that is
// known, recent (MaxAge) and not possibly counted before; a new start time
// or a drop is a reset; duplicates, late points and points from the future
// add nothing. ok is false when the point gives no increment, with the
// reason counted in r, which also receives the Record to Save. metric names
// the series' family in warnings.
func (c *Tracker) Count(ctx context.Context, id SeriesID, metric string, start, ts pcommon.Timestamp, count uint64, now time.Time, r *Result) (delta uint64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expire(now, r)
	key := uint64(id)
	// A count is kept as a summary point without sum: same comparison
	// (a reset when it falls) and same saved format.
	p := snapshot{start: start, ts: ts, count: count}
	s, out, reason, moved := c.step(ctx, key, &p, now, summarySeries, r)
	r.record(key, p.ts, out, moved)
	if out != drop && !moved {
		// The same point again: its increment was already given, and an
		// increment given twice is a double count.
		out, reason = drop, ReasonDuplicate
	}
	switch out {
	case drop:
		c.dropped(r, reason, metric)
		return 0, false
	case emitDelta:
		return count - s.prev.count, true
	}
	return count, true
}
