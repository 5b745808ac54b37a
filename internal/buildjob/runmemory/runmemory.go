// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package runmemory is the run memory of the buildjob derivation: which job
// runs are active, waiting for their start, or counted, and from which
// source (status records, a job span) each was seen, so that every run is
// counted exactly once. What the owner attaches to a run (its resource and
// dimensions) is an opaque payload. It is not safe for concurrent use.
//
// A run is identified by its job id and its start; the runs of one job id
// never overlap in time, because the service keeps one job per id. The
// matching rules, documented in the connector's README:
//
//   - A start joins the earliest run known only from its end (a span or an
//     end record arrived first) whose end is not before the start; otherwise
//     it begins a new run. So a start after an end is a new run, and a start
//     that arrives after its run's span or end is not.
//   - An end joins the run with the latest start not after it. An end record
//     for a run whose start is unknown is held until the next sweep after
//     the pending grace (its start may still arrive) and then counted
//     without a duration. An end record stamped before a run's span began
//     is not that run's; a start record that run took before the end is
//     given back, and the two are a run of their own.
//   - A job span joins the run without a span that overlaps it the most; a
//     span that overlaps no run is a run of its own.
//   - A run is counted once, when its first end is known; every later record
//     for it only fills in what was missing (counted as deduplicated).
//   - A run active for the timeout (since its start arrived) is counted once
//     as timed out; it is then remembered for another timeout, so its late
//     end or span is ignored.
package runmemory // import "github.com/gpubuild/otelcol-gpubuild/internal/buildjob/runmemory"

import (
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Key identifies a job: the service that runs it and its build.job.id.
type Key struct {
	Service string
	JobID   string
}

// State is where a run is in its life.
type State uint8

const (
	// Active is a run whose start is known and end not yet.
	Active State = iota
	// Pending is a run whose end is known and start not (yet); it is
	// counted at a later sweep.
	Pending
	// Ended is a counted run, kept to recognize later records for it.
	Ended
)

// Run is one execution of a job, assembled from its span and status
// records. Its exported fields are what the owner persists.
//
// The one-byte fields come first, together: thousands of runs are
// remembered, and apart they would pad a run into the next size class.
type Run[P any] struct {
	State   State
	HasSpan bool
	onOpen  bool // on the open list (else on the ended list, or new)
	// Start is the earliest start seen, End the end that counted the run
	// (for a timeout, Start + the timeout). Zero means unknown.
	Start, End pcommon.Timestamp
	// What each source said, to recognize duplicates per source.
	LogStart, LogEnd   pcommon.Timestamp
	SpanStart, SpanEnd pcommon.Timestamp
	Result             string
	// ListedAt is when the run entered its current list (open or ended).
	ListedAt time.Time
	Payload  P

	job        *Job[P]
	prev, next *Run[P]
}

// Job holds the runs of one job id, ordered by position.
type Job[P any] struct {
	key    Key
	runs   []*Run[P]
	inline [2]*Run[P] // backs runs for the usual one or two runs, saving an allocation
	dirty  bool       // changed since ClearDirty
	// firstInUse: first holds one of the job's runs, so that a job of one
	// run (most jobs) is one object for the collector to mark, not two.
	firstInUse bool
	first      Run[P]

	// Stored is the owner's bookkeeping of the job's persisted entry, kept
	// here rather than in a map of the owner's so that a remembered job
	// costs no more than its own record.
	Stored StoredEntry
}

// Key is the job's key.
func (jr *Job[P]) Key() Key { return jr.key }

// Runs are the job's runs, ordered by start (or end when the start is
// unknown); empty once the job is forgotten.
func (jr *Job[P]) Runs() []*Run[P] { return jr.runs }

// Counted is reported to the owner once per run.
type Counted[P any] struct {
	Payload     P
	Result      string
	Seconds     float64
	HasDuration bool
	// Start and End: the run's window when HasDuration.
	Start, End pcommon.Timestamp
}

// Stats counts what the owner reports as its own telemetry.
type Stats struct {
	// Deduplicated: records recognized as belonging to a run already counted.
	Deduplicated int64
	// EndBeforeStart: end records before the start of the job's only
	// active run (malformed).
	EndBeforeStart int64
	// EvictedActive, EvictedEnded: runs forgotten because of MaxRuns.
	EvictedActive, EvictedEnded int64
}

// Config sets the tracker's bounds and how it handles payloads.
type Config[P any] struct {
	// Timeout: a run active this long is counted as TimeoutResult; counted
	// runs are remembered this long.
	Timeout time.Duration
	// PendingGrace: how long an end waits for its start before it is
	// counted without a duration.
	PendingGrace time.Duration
	// MaxRuns bounds the open runs, and separately the counted runs kept.
	MaxRuns       int
	TimeoutResult string
	// Own returns a payload that no longer references the input batch (or
	// the owner's decoded state: Restore passes restored payloads through
	// it too, so that whatever the owner shares between runs is shared by
	// restored runs alike).
	Own func(P) P
	// Fill completes a kept payload from a later record's.
	Fill func(have *P, from P)
	// Count receives every counted run.
	Count func(Counted[P])
}

// Tracker is the per-run state machine.
type Tracker[P any] struct {
	cfg   Config[P]
	stats Stats

	jobs  map[Key]*Job[P]
	open  runList[P] // active and pending runs, in creation order
	ended runList[P] // counted runs, in the order they were counted

	// track lists the jobs changed since ClearDirty in dirty (for the
	// owner's persistence).
	track bool
	dirty []*Job[P]
}

// New returns an empty tracker.
func New[P any](cfg Config[P]) *Tracker[P] {
	return &Tracker[P]{cfg: cfg, jobs: map[Key]*Job[P]{}}
}

// TakeStats returns the stats since the last call and resets them.
func (t *Tracker[P]) TakeStats() Stats {
	s := t.stats
	t.stats = Stats{}
	return s
}

// Stats returns the stats since the last TakeStats.
func (t *Tracker[P]) Stats() Stats { return t.stats }

// Timeout is the configured timeout.
func (t *Tracker[P]) Timeout() time.Duration { return t.cfg.Timeout }

// Jobs is how many jobs are remembered.
func (t *Tracker[P]) Jobs() int { return len(t.jobs) }

// EndedRuns is how many counted runs are remembered.
func (t *Tracker[P]) EndedRuns() int { return t.ended.len }

// Start handles a status record of key that starts a run at ts. key's
// strings and p may be borrowed from the input.
func (t *Tracker[P]) Start(key Key, p P, ts pcommon.Timestamp, now time.Time) {
	jr := t.jobs[key]
	if jr != nil {
		if t.repeatedRecord(jr, ts, true) {
			return
		}
		// The earliest run known only from its end that this start precedes.
		var owner *Run[P]
		for _, r := range jr.runs {
			if r.LogStart != 0 || r.End == 0 || r.End < ts {
				continue
			}
			if owner == nil || r.End < owner.End {
				owner = r
			}
		}
		if owner != nil {
			owner.LogStart = ts
			if owner.Start == 0 || ts < owner.Start {
				owner.Start = ts
			}
			t.cfg.Fill(&owner.Payload, p)
			jr.sort()
			if owner.State == Pending {
				t.finish(owner, owner.Result, now)
			} else {
				t.stats.Deduplicated++
			}
			return
		}
	}
	r := t.newRun(jr, key, p, now)
	r.State = Active
	r.Start, r.LogStart = ts, ts
	r.job.insert(r)
	t.addOpen(r)
}

// repeatedRecord touches jr and tells whether one of its runs already has
// the start record (start) or end record at ts: a repeated record, counted
// as deduplicated.
func (t *Tracker[P]) repeatedRecord(jr *Job[P], ts pcommon.Timestamp, start bool) bool {
	t.Touch(jr)
	for _, r := range jr.runs {
		if start && r.LogStart == ts || !start && r.LogEnd == ts {
			t.stats.Deduplicated++
			return true
		}
	}
	return false
}

// End handles a status record of key that ends a run at ts with result.
func (t *Tracker[P]) End(key Key, p P, ts pcommon.Timestamp, result string, now time.Time) {
	jr := t.jobs[key]
	if jr != nil {
		if t.repeatedRecord(jr, ts, false) {
			return
		}
		var owner, took *Run[P]
		activeLater := false
		for _, r := range jr.runs {
			if r.Start == 0 {
				continue
			}
			if r.Start > ts {
				activeLater = activeLater || r.State == Active
				continue
			}
			if r.HasSpan && r.SpanStart > ts {
				// The end is written once the build has begun: this one
				// is an earlier run's, and a start record r took before
				// it may be that run's too.
				if r.LogStart != 0 && r.LogStart <= ts && (took == nil || r.LogStart > took.LogStart) {
					took = r
				}
				continue
			}
			if owner == nil || r.Start > owner.Start {
				owner = r
			}
		}
		if took != nil && (owner == nil || took.LogStart > owner.Start) {
			t.giveBackStart(took, key, p, ts, result, now)
			return
		}
		switch {
		case owner != nil && owner.LogEnd == 0:
			owner.LogEnd = ts
			t.cfg.Fill(&owner.Payload, p)
			if owner.State == Active {
				owner.End = ts
				t.finish(owner, result, now)
			} else {
				// Ended by its span or by a timeout: already counted.
				t.stats.Deduplicated++
			}
			return
		case owner != nil && ts < owner.LogEnd:
			// A second, earlier end for a run whose first end counted it.
			t.stats.Deduplicated++
			return
		case owner == nil && activeLater:
			t.stats.EndBeforeStart++
			return
		}
		// Otherwise the end of a later run whose start has not arrived.
	}
	r := t.newRun(jr, key, p, now)
	r.State = Pending
	r.End, r.LogEnd = ts, ts
	r.Result = result
	r.job.insert(r)
	t.addOpen(r)
}

// giveBackStart undoes the join of a start record with the run of a job
// span that began after the end record at ts: the start record is the
// start of the run that ts ends (a retried build whose earlier run sent
// no span, its records arriving after the later run's span). That run is
// counted now; the span's run keeps what its span said.
func (t *Tracker[P]) giveBackStart(took *Run[P], key Key, p P, ts pcommon.Timestamp, result string, now time.Time) {
	r := t.newRun(took.job, key, p, now)
	r.Start, r.LogStart = took.LogStart, took.LogStart
	r.End, r.LogEnd = ts, ts
	took.LogStart, took.Start = 0, took.SpanStart
	took.job.sort()
	r.job.insert(r)
	t.finish(r, result, now)
}

// Span handles a job span, which carries a whole run: start, end and result.
func (t *Tracker[P]) Span(key Key, p P, start, end pcommon.Timestamp, result string, now time.Time) {
	jr := t.jobs[key]
	if jr != nil {
		t.Touch(jr)
		for _, r := range jr.runs {
			if r.HasSpan && r.SpanStart == start && r.SpanEnd == end {
				t.stats.Deduplicated++
				return
			}
		}
		if owner := jr.mostOverlapping(start, end); owner != nil {
			owner.HasSpan, owner.SpanStart, owner.SpanEnd = true, start, end
			if owner.Start == 0 || start < owner.Start {
				owner.Start = start
			}
			t.cfg.Fill(&owner.Payload, p)
			jr.sort()
			switch owner.State {
			case Active:
				owner.End = end
				t.finish(owner, result, now)
			case Pending:
				t.finish(owner, owner.Result, now)
			default:
				t.stats.Deduplicated++
			}
			return
		}
	}
	r := t.newRun(jr, key, p, now)
	r.HasSpan, r.SpanStart, r.SpanEnd = true, start, end
	r.Start, r.End = start, end
	r.job.insert(r)
	t.finish(r, result, now)
}

// Sweep counts timed-out runs and pending ends whose start did not come,
// and forgets counted runs older than the timeout. final counts every
// pending end at once.
//
// The timeout is measured on the collector's clock from when the start
// arrived, not from the start's timestamp: clock skew between the service
// and the collector, or a start delivered late, cannot time a run out early.
func (t *Tracker[P]) Sweep(now time.Time, final bool) {
	for r := t.open.head; r != nil; {
		next := r.next
		switch r.State {
		case Active:
			if now.Sub(r.ListedAt) >= t.cfg.Timeout {
				r.End = r.Start + pcommon.Timestamp(t.cfg.Timeout.Nanoseconds())
				t.finish(r, t.cfg.TimeoutResult, now)
			}
		case Pending:
			if final || now.Sub(r.ListedAt) >= t.cfg.PendingGrace {
				t.finish(r, r.Result, now)
			}
		}
		r = next
	}
	for r := t.ended.head; r != nil && now.Sub(r.ListedAt) >= t.cfg.Timeout; r = t.ended.head {
		t.ended.remove(r)
		t.forget(r)
	}
}

// Open is how many runs are active or pending: each Sweep may count one.
func (t *Tracker[P]) Open() int { return t.open.len }

// NextForget is when Sweep forgets the oldest counted run (the first
// counted run older than the timeout); false when none is remembered.
func (t *Tracker[P]) NextForget() (time.Time, bool) {
	if t.ended.head == nil {
		return time.Time{}, false
	}
	return t.ended.head.ListedAt.Add(t.cfg.Timeout), true
}

// ForEachActive calls f with the payload of every run started and not yet
// ended.
func (t *Tracker[P]) ForEachActive(f func(P)) {
	for r := t.open.head; r != nil; r = r.next {
		if r.State == Active {
			f(r.Payload)
		}
	}
}

// ForEachActiveRun calls f with the start and payload of every run
// started and not yet ended.
func (t *Tracker[P]) ForEachActiveRun(f func(start pcommon.Timestamp, p P)) {
	for r := t.open.head; r != nil; r = r.next {
		if r.State == Active {
			f(r.Start, r.Payload)
		}
	}
}

func (t *Tracker[P]) newRun(jr *Job[P], key Key, p P, now time.Time) *Run[P] {
	if jr == nil {
		// The service name is the owner's own copy; the job id points into
		// the input batch and must not keep it alive.
		key.JobID = strings.Clone(key.JobID)
		jr = &Job[P]{key: key}
		jr.runs = jr.inline[:0]
		t.jobs[key] = jr
	}
	t.Touch(jr)
	var r *Run[P]
	if jr.firstInUse {
		r = new(Run[P])
	} else {
		r, jr.firstInUse = &jr.first, true
	}
	*r = Run[P]{job: jr, Payload: t.cfg.Own(p), ListedAt: now}
	return r
}

func (t *Tracker[P]) addOpen(r *Run[P]) {
	t.open.pushBack(r)
	r.onOpen = true
	if t.open.len > t.cfg.MaxRuns {
		oldest := t.open.head
		t.open.remove(oldest)
		oldest.onOpen = false
		t.forget(oldest)
		t.stats.EvictedActive++
	}
}

// finish counts r once with result and moves it to the counted runs.
func (t *Tracker[P]) finish(r *Run[P], result string, now time.Time) {
	if r.onOpen {
		t.open.remove(r)
		r.onOpen = false
	}
	t.Touch(r.job)
	r.State = Ended
	r.Result = result
	r.ListedAt = now
	t.ended.pushBack(r)
	if t.ended.len > t.cfg.MaxRuns {
		oldest := t.ended.head
		t.ended.remove(oldest)
		t.forget(oldest)
		t.stats.EvictedEnded++
	}
	c := Counted[P]{Payload: r.Payload, Result: result}
	if result != t.cfg.TimeoutResult && r.Start != 0 && r.End >= r.Start {
		c.Seconds = float64(r.End-r.Start) / float64(time.Second)
		c.HasDuration = true
		c.Start, c.End = r.Start, r.End
	}
	t.cfg.Count(c)
}

// forget removes r from its job; the job goes when it has no runs left.
func (t *Tracker[P]) forget(r *Run[P]) {
	jr := r.job
	t.Touch(jr)
	for i, x := range jr.runs {
		if x == r {
			jr.runs = append(jr.runs[:i], jr.runs[i+1:]...)
			break
		}
	}
	if r == &jr.first {
		jr.firstInUse = false // reused by the job's next run; r stays as it is until then
	}
	if len(jr.runs) == 0 {
		delete(t.jobs, jr.key)
	}
}
