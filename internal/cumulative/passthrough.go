// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cumulative // import "github.com/gpubuild/otelcol-gpubuild/internal/cumulative"

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// passedSeries remembers, in memory only, the newest timestamp of each
// cumulative series Accumulate passes through. Two exports of one SDK can
// reach the collector out of order (a shutdown cancels the export in flight
// on the client after the collector took it, then the final export
// overtakes it); the older cumulative point adds nothing the newer one does
// not carry, and a store that keeps series strictly in order (Prometheus
// remote write) refuses it together with every other point of its request.
type passedSeries struct {
	last map[uint64]passedPoint
	// purgeAt is when entries older than the TTL are next looked for.
	purgeAt time.Time
}

type passedPoint struct {
	ts   pcommon.Timestamp
	seen int64 // UnixNano
}

// passInOrder reports whether the cumulative point at ts of series key goes
// on: false (counted) when it is older than the series' last one. The same
// timestamp again passes: it is the same total, and a request refused
// further on (a full queue) comes back from its client with it.
// Within MaxSeries series are remembered; past it, new ones pass unchecked.
func (c *Tracker) passInOrder(key uint64, ts pcommon.Timestamp, now time.Time, metric string, cv *Result) bool {
	p := &c.passed
	if p.last == nil {
		p.last = map[uint64]passedPoint{}
	}
	if now.After(p.purgeAt) {
		limit := now.Add(-c.cfg.TTL).UnixNano()
		for k, e := range p.last {
			if e.seen < limit {
				delete(p.last, k)
			}
		}
		p.purgeAt = now.Add(c.cfg.TTL / 4)
	}
	e, ok := p.last[key]
	switch {
	case ok && ts < e.ts:
		c.dropped(cv, ReasonOutOfOrder, metric)
		return false
	case ok || len(p.last) < c.cfg.MaxSeries:
		p.last[key] = passedPoint{ts: ts, seen: now.UnixNano()}
	}
	return true
}
