package derive

import (
	"math"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// The job tracker decides when a job run is counted. It sees three kinds of
// events for a job id: a start (status log record), an end (status log
// record) and a job span, which carries both. A run is identified by its job
// id and its start; the runs of one job id never overlap in time, because the
// service keeps one job per id. The matching rules, documented in README.md:
//
//   - A start joins the earliest run known only from its end (a span or an
//     end record arrived first) whose end is not before the start; otherwise
//     it begins a new run. So a start after an end is a new run, and a start
//     that arrives after its run's span or end is not.
//   - An end joins the run with the latest start not after it. An end record
//     for a run whose start is unknown is held until the next flush (its
//     start may still arrive) and then counted without a duration.
//   - A job span joins the run without a span that overlaps it the most; a
//     span that overlaps no run is a run of its own.
//   - A run is counted once, when its first end is known; every later record
//     for it only fills in what was missing (counted as deduplicated).
//   - A run active for job_timeout (since its start arrived) is counted once
//     as timeout; it is then remembered for another job_timeout, so its late
//     end or span is ignored.

// jobKey identifies a job: the service that runs it and its build.job.id.
type jobKey struct {
	service string
	jobID   string
}

// jobRecord is what the tracker needs from a span or log record, borrowed
// from the input batch for the duration of one call.
type jobRecord struct {
	key  jobKey
	res  *resourceEntry
	dims []dimValue
}

type runState uint8

const (
	runActive  runState = iota // start known, end not yet
	runPending                 // end known, start not (yet): counted at a later flush
	runEnded                   // counted; kept to recognize later records for it
)

// run is one execution of a job, assembled from its span and status records.
type run struct {
	job   *jobRuns
	state runState
	res   *resourceEntry
	dims  []dimValue

	// start is the earliest start seen, end the end that counted the run
	// (for a timeout, start + job_timeout). Zero means unknown.
	start, end pcommon.Timestamp
	// What each source said, to recognize duplicates per source.
	logStart, logEnd   pcommon.Timestamp
	spanStart, spanEnd pcommon.Timestamp
	hasSpan            bool
	result             string

	listedAt   time.Time // when the run entered its current list
	onOpen     bool      // on the open list (else on the ended list, or new)
	prev, next *run
}

// position orders the runs of one job in time.
func (r *run) position() pcommon.Timestamp {
	if r.start != 0 {
		return r.start
	}
	return r.end
}

// jobRuns holds the runs of one job id, ordered by position.
type jobRuns struct {
	key    jobKey
	dirty  bool // changed since the state was last persisted
	runs   []*run
	inline [2]*run // backs runs for the usual one or two runs, saving an allocation
}

// runList is an intrusive doubly linked list of runs.
type runList struct {
	head, tail *run
	len        int
}

func (l *runList) pushBack(r *run) {
	r.prev, r.next = l.tail, nil
	if l.tail != nil {
		l.tail.next = r
	} else {
		l.head = r
	}
	l.tail = r
	l.len++
}

func (l *runList) remove(r *run) {
	if r.prev != nil {
		r.prev.next = r.next
	} else {
		l.head = r.next
	}
	if r.next != nil {
		r.next.prev = r.prev
	} else {
		l.tail = r.prev
	}
	r.prev, r.next = nil, nil
	l.len--
}

// countedRun is reported to the tracker's owner once per run.
type countedRun struct {
	res         *resourceEntry
	dims        []dimValue
	result      string
	seconds     float64
	hasDuration bool
}

// jobTracker is the per-run state machine. It is not safe for concurrent use.
type jobTracker struct {
	timeout      time.Duration
	pendingGrace time.Duration
	maxRuns      int
	stats        *derivationStats
	count        func(countedRun)

	jobs  map[jobKey]*jobRuns
	open  runList // active and pending runs, in creation order
	ended runList // counted runs, in the order they were counted

	// track lists the jobs changed since the state was last persisted in
	// dirty (only when the state is persisted).
	track bool
	dirty []*jobRuns
}

// touch marks jr as changed.
func (t *jobTracker) touch(jr *jobRuns) {
	if t.track && !jr.dirty {
		jr.dirty = true
		t.dirty = append(t.dirty, jr)
	}
}

// clearDirty forgets the changes, once persisted.
func (t *jobTracker) clearDirty() {
	for i, jr := range t.dirty {
		jr.dirty = false
		t.dirty[i] = nil
	}
	t.dirty = t.dirty[:0]
}

func newJobTracker(timeout, pendingGrace time.Duration, maxRuns int, stats *derivationStats, count func(countedRun)) *jobTracker {
	return &jobTracker{
		timeout:      timeout,
		pendingGrace: pendingGrace,
		maxRuns:      maxRuns,
		stats:        stats,
		count:        count,
		jobs:         map[jobKey]*jobRuns{},
	}
}

// start handles a status record that starts a run at ts.
func (t *jobTracker) start(rec *jobRecord, ts pcommon.Timestamp, now time.Time) {
	jr := t.jobs[rec.key]
	if jr != nil {
		t.touch(jr)
		for _, r := range jr.runs {
			if r.logStart == ts {
				t.stats.deduplicated++
				return
			}
		}
		// The earliest run known only from its end that this start precedes.
		var owner *run
		for _, r := range jr.runs {
			if r.logStart != 0 || r.end == 0 || r.end < ts {
				continue
			}
			if owner == nil || r.end < owner.end {
				owner = r
			}
		}
		if owner != nil {
			owner.logStart = ts
			if owner.start == 0 || ts < owner.start {
				owner.start = ts
			}
			t.fillDims(owner, rec)
			jr.sort()
			if owner.state == runPending {
				t.finish(owner, owner.result, now)
			} else {
				t.stats.deduplicated++
			}
			return
		}
	}
	r := t.newRun(jr, rec, now)
	r.state = runActive
	r.start, r.logStart = ts, ts
	r.job.insert(r)
	t.addOpen(r)
}

// end handles a status record that ends a run at ts with result.
func (t *jobTracker) end(rec *jobRecord, ts pcommon.Timestamp, result string, now time.Time) {
	jr := t.jobs[rec.key]
	if jr != nil {
		t.touch(jr)
		for _, r := range jr.runs {
			if r.logEnd == ts {
				t.stats.deduplicated++
				return
			}
		}
		var owner *run
		activeLater := false
		for _, r := range jr.runs {
			if r.start == 0 {
				continue
			}
			if r.start > ts {
				activeLater = activeLater || r.state == runActive
				continue
			}
			if owner == nil || r.start > owner.start {
				owner = r
			}
		}
		switch {
		case owner != nil && owner.logEnd == 0:
			owner.logEnd = ts
			t.fillDims(owner, rec)
			if owner.state == runActive {
				owner.end = ts
				t.finish(owner, result, now)
			} else {
				// Ended by its span or by a timeout: already counted.
				t.stats.deduplicated++
			}
			return
		case owner != nil && ts < owner.logEnd:
			// A second, earlier end for a run whose first end counted it.
			t.stats.deduplicated++
			return
		case owner == nil && activeLater:
			t.stats.skipped[skipEndBeforeStart]++
			return
		}
		// Otherwise the end of a later run whose start has not arrived.
	}
	r := t.newRun(jr, rec, now)
	r.state = runPending
	r.end, r.logEnd = ts, ts
	r.result = result
	r.job.insert(r)
	t.addOpen(r)
}

// span handles a job span, which carries a whole run: start, end and result.
func (t *jobTracker) span(rec *jobRecord, start, end pcommon.Timestamp, result string, now time.Time) {
	jr := t.jobs[rec.key]
	if jr != nil {
		t.touch(jr)
		for _, r := range jr.runs {
			if r.hasSpan && r.spanStart == start && r.spanEnd == end {
				t.stats.deduplicated++
				return
			}
		}
		if owner := jr.mostOverlapping(start, end); owner != nil {
			owner.hasSpan, owner.spanStart, owner.spanEnd = true, start, end
			if owner.start == 0 || start < owner.start {
				owner.start = start
			}
			t.fillDims(owner, rec)
			jr.sort()
			switch owner.state {
			case runActive:
				owner.end = end
				t.finish(owner, result, now)
			case runPending:
				t.finish(owner, owner.result, now)
			default:
				t.stats.deduplicated++
			}
			return
		}
	}
	r := t.newRun(jr, rec, now)
	r.hasSpan, r.spanStart, r.spanEnd = true, start, end
	r.start, r.end = start, end
	r.job.insert(r)
	t.finish(r, result, now)
}

// sweep counts timed-out runs and pending ends whose start did not come,
// and forgets ended runs older than job_timeout. final counts every pending
// end at once (shutdown).
//
// job_timeout is measured on the collector's clock from when the start
// arrived, not from the start's timestamp: clock skew between the service and
// the collector, or a start delivered late, cannot time a run out early.
func (t *jobTracker) sweep(now time.Time, final bool) {
	for r := t.open.head; r != nil; {
		next := r.next
		switch r.state {
		case runActive:
			if now.Sub(r.listedAt) >= t.timeout {
				r.end = r.start + pcommon.Timestamp(t.timeout.Nanoseconds())
				t.finish(r, resultTimeout, now)
			}
		case runPending:
			if final || now.Sub(r.listedAt) >= t.pendingGrace {
				t.finish(r, r.result, now)
			}
		}
		r = next
	}
	for r := t.ended.head; r != nil && now.Sub(r.listedAt) >= t.timeout; r = t.ended.head {
		t.ended.remove(r)
		t.forget(r)
	}
}

// forEachActive calls f for every run started and not yet ended.
func (t *jobTracker) forEachActive(f func(*run)) {
	for r := t.open.head; r != nil; r = r.next {
		if r.state == runActive {
			f(r)
		}
	}
}

func (t *jobTracker) newRun(jr *jobRuns, rec *jobRecord, now time.Time) *run {
	if jr == nil {
		// The service name is the resource entry's own copy; the job id
		// points into the input batch and must not keep it alive.
		key := jobKey{service: rec.key.service, jobID: strings.Clone(rec.key.jobID)}
		jr = &jobRuns{key: key}
		jr.runs = jr.inline[:0]
		t.jobs[key] = jr
	}
	t.touch(jr)
	return &run{job: jr, res: rec.res, dims: ownedDims(rec.dims), listedAt: now}
}

func (t *jobTracker) addOpen(r *run) {
	t.open.pushBack(r)
	r.onOpen = true
	if t.open.len > t.maxRuns {
		oldest := t.open.head
		t.open.remove(oldest)
		oldest.onOpen = false
		t.forget(oldest)
		t.stats.evicted[evictedActive]++
	}
}

// finish counts r once with result and moves it to the ended runs.
func (t *jobTracker) finish(r *run, result string, now time.Time) {
	if r.onOpen {
		t.open.remove(r)
		r.onOpen = false
	}
	t.touch(r.job)
	r.state = runEnded
	r.result = result
	r.listedAt = now
	t.ended.pushBack(r)
	if t.ended.len > t.maxRuns {
		oldest := t.ended.head
		t.ended.remove(oldest)
		t.forget(oldest)
		t.stats.evicted[evictedEnded]++
	}
	c := countedRun{res: r.res, dims: r.dims, result: result}
	if result != resultTimeout && r.start != 0 && r.end >= r.start {
		c.seconds = float64(r.end-r.start) / float64(time.Second)
		c.hasDuration = true
	}
	t.count(c)
}

// forget removes r from its job; the job goes when it has no runs left.
func (t *jobTracker) forget(r *run) {
	jr := r.job
	t.touch(jr)
	for i, x := range jr.runs {
		if x == r {
			jr.runs = append(jr.runs[:i], jr.runs[i+1:]...)
			break
		}
	}
	if len(jr.runs) == 0 {
		delete(t.jobs, jr.key)
	}
}

// fillDims sets the dimensions a run still lacks from a later record.
func (t *jobTracker) fillDims(r *run, rec *jobRecord) {
	for i, v := range rec.dims {
		if r.dims[i].kind == dimUnset && v.kind != dimUnset {
			r.dims[i] = v.owned()
		}
	}
}

func (jr *jobRuns) insert(r *run) {
	jr.runs = append(jr.runs, r)
	jr.sort()
}

// sort restores the order by position (insertion sort: a job has few runs).
func (jr *jobRuns) sort() {
	for i := 1; i < len(jr.runs); i++ {
		for j := i; j > 0 && jr.runs[j].position() < jr.runs[j-1].position(); j-- {
			jr.runs[j], jr.runs[j-1] = jr.runs[j-1], jr.runs[j]
		}
	}
}

// mostOverlapping returns the run without a span whose time range overlaps
// [start, end] the most. A run's range is bounded by its neighbours where
// its own start or end is unknown.
func (jr *jobRuns) mostOverlapping(start, end pcommon.Timestamp) *run {
	var best *run
	bestOverlap := int64(-1)
	s, e := int64(start), int64(end)
	for i, r := range jr.runs {
		if r.hasSpan {
			continue
		}
		lo, hi := int64(r.start), int64(r.end)
		if r.start == 0 {
			lo = math.MinInt64
			if i > 0 {
				lo = int64(jr.runs[i-1].position())
			}
		}
		if r.end == 0 {
			hi = math.MaxInt64
			if i+1 < len(jr.runs) {
				hi = int64(jr.runs[i+1].position())
			}
		}
		overlap := min(hi, e) - max(lo, s)
		if overlap >= 0 && overlap > bestOverlap {
			best, bestOverlap = r, overlap
		}
	}
	return best
}
