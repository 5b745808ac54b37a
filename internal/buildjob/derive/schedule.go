// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derive

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// boundaries are the flush boundaries origin + k*interval, k >= 1: where a
// ticker started at origin would flush. The flush loop arms its timer for
// a boundary only while a flush there has something to do, so an idle
// derivation does not wake every interval; what it derives still leaves
// at the boundary it would have left at with the ticker.
type boundaries struct {
	origin   time.Time
	interval time.Duration
}

// ceil is the first boundary at or after t.
func (b boundaries) ceil(t time.Time) time.Time {
	if !t.After(b.origin) {
		return b.origin.Add(b.interval)
	}
	k := (t.Sub(b.origin) + b.interval - 1) / b.interval
	return b.origin.Add(k * b.interval)
}

// floor is the last boundary at or before t (origin before the first).
func (b boundaries) floor(t time.Time) time.Time {
	if !t.After(b.origin) {
		return b.origin
	}
	return b.origin.Add(t.Sub(b.origin) / b.interval * b.interval)
}

// next is the boundary to flush at after the one at last: the first
// boundary at or after due and now, and after last.
func (b boundaries) next(due, now, last time.Time) time.Time {
	at := b.ceil(latest(due, now))
	if !at.After(last) {
		at = b.ceil(last.Add(1))
	}
	return at
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// flushNow says whether the next flush has something to do whenever it
// comes: derived counts to emit (carried-over ones included; in cumulative
// mode every series, re-emitted each flush), active runs to report in
// build.jobs.active or a group to report 0 once, pending ends and GPU
// figures to retry, state not yet written.
func (d *deriver) flushNow() bool {
	if len(d.series.list) > 0 || len(d.prevActive) > 0 || len(d.dirtySeries) > 0 || d.metaDirty || len(d.httpResult.Records) > 0 {
		return true
	}
	if d.gpu != nil && len(d.gpu.pending) > 0 {
		return true
	}
	return d.jobs != nil && (d.jobs.Open() > 0 || len(d.jobs.Dirty()) > 0)
}

// flushDue is when the next flush has something to do: now (the zero time)
// when flushNow says so, else when the run memory forgets its oldest
// counted run (a deletion the state writes); false when never.
func (d *deriver) flushDue() (time.Time, bool) {
	if d.flushNow() {
		return time.Time{}, true
	}
	if d.jobs != nil {
		return d.jobs.NextForget()
	}
	return time.Time{}, false
}

// skipTo starts the next delta points at boundary b, as the empty flushes
// of the boundaries the loop slept through would have; only while nothing
// is waiting to be emitted (carried-over points keep their start).
func (d *deriver) skipTo(b time.Time) {
	ts := pcommon.NewTimestampFromTime(b)
	if !d.cumulative && ts > d.lastFlush && len(d.series.list) == 0 {
		d.lastFlush = ts
	}
}
