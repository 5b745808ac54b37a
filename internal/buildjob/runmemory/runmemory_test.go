// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package runmemory

import (
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// payload is a test payload: a label that later records may fill in.
type payload struct{ label string }

func newTracker(counted *[]Counted[payload]) *Tracker[payload] {
	return New(Config[payload]{
		Timeout:       time.Hour,
		PendingGrace:  10 * time.Second,
		MaxRuns:       100,
		TimeoutResult: "timeout",
		Own:           func(p payload) payload { return p },
		Fill: func(have *payload, from payload) {
			if have.label == "" {
				have.label = from.label
			}
		},
		Count: func(c Counted[payload]) { *counted = append(*counted, c) },
	})
}

var t0 = time.Date(2026, time.March, 2, 10, 0, 0, 0, time.UTC)

func ts(d time.Duration) pcommon.Timestamp { return pcommon.NewTimestampFromTime(t0.Add(d)) }

// A run seen as start and end records and then as its span is counted
// once, with the payload completed by the later record.
func TestRunCountedOnceAcrossSources(t *testing.T) {
	var counted []Counted[payload]
	tr := newTracker(&counted)
	key := Key{Service: "svc", JobID: "job-1"}
	tr.Start(key, payload{}, ts(0), t0)
	tr.End(key, payload{label: "cagra"}, ts(40*time.Second), "success", t0.Add(40*time.Second))
	tr.Span(key, payload{}, ts(0), ts(40*time.Second), "success", t0.Add(45*time.Second))
	require.Len(t, counted, 1)
	assert.Equal(t, Counted[payload]{Payload: payload{label: "cagra"}, Result: "success", Seconds: 40, HasDuration: true,
		Start: ts(0), End: ts(40 * time.Second)}, counted[0])
	assert.Equal(t, Stats{Deduplicated: 1}, tr.TakeStats())
}

// A build retried under its job id: the first run sent no span (sampled
// out, or it failed before its span began), the second one did, and the
// second run's span arrives before the first run's status records (the
// SDK's span and log exporters flush on their own timers). The first
// run's start record first joins the span's run; its end record, written
// before that span began, shows it belongs to a run of its own. Each run
// is counted once with its own result.
func TestRetriedRunsStatusRecordsAfterTheNextRunsSpan(t *testing.T) {
	var counted []Counted[payload]
	tr := newTracker(&counted)
	key := Key{Service: "svc", JobID: "a"}
	now := t0.Add(time.Minute)
	tr.Span(key, payload{}, ts(49*time.Second), ts(98*time.Second), "success", now)
	tr.Start(key, payload{}, ts(0), now)                                            // the first run's
	tr.End(key, payload{}, ts(48*time.Second), "failure", now)                      // the first run's
	tr.Start(key, payload{}, ts(49*time.Second), now)                               // the second run's
	tr.End(key, payload{}, ts(98*time.Second), "success", now)                      // the second run's
	tr.Span(key, payload{}, ts(49*time.Second), ts(98*time.Second), "success", now) // again
	tr.Sweep(now.Add(time.Minute), true)
	require.Len(t, counted, 2)
	assert.Equal(t, Counted[payload]{Result: "success", Seconds: 49, HasDuration: true, Start: ts(49 * time.Second), End: ts(98 * time.Second)}, counted[0])
	assert.Equal(t, Counted[payload]{Result: "failure", Seconds: 48, HasDuration: true, Start: ts(0), End: ts(48 * time.Second)}, counted[1])
	assert.Equal(t, Stats{Deduplicated: 4}, tr.TakeStats(), "the first start's join, the second run's two records, the span again")
	runs := tr.jobs[key].Runs()
	require.Len(t, runs, 2)
	assert.Equal(t, ts(0), runs[0].Start)
	assert.Equal(t, ts(49*time.Second), runs[1].Start)
}

// What Restore puts back behaves as the runs did before: an active run
// ends once, an ended run's late span is recognized, and the lists keep
// their order (the oldest counted run is evicted first).
func TestRestoreContinuesTheRuns(t *testing.T) {
	var counted []Counted[payload]
	tr := newTracker(&counted)
	tr.Track()
	a, b, c := Key{"svc", "a"}, Key{"svc", "b"}, Key{"svc", "c"}
	jobs := tr.Restore(map[Key][]*Run[payload]{
		a: {{State: Active, Start: ts(0), LogStart: ts(0), ListedAt: t0, Payload: payload{"x"}}},
		b: {{State: Ended, Start: ts(0), End: ts(5 * time.Second), LogStart: ts(0), LogEnd: ts(5 * time.Second), Result: "success", ListedAt: t0.Add(6 * time.Second)}},
		c: {{State: Ended, Start: ts(0), End: ts(2 * time.Second), LogStart: ts(0), LogEnd: ts(2 * time.Second), Result: "failure", ListedAt: t0.Add(3 * time.Second)}},
	})
	require.Len(t, jobs, 3)
	assert.Empty(t, tr.Dirty(), "restoring is not a change")
	for _, job := range jobs {
		assert.Same(t, &job.first, job.Runs()[0], "a restored job of one run is one object, as a new one")
	}
	tr.End(a, payload{}, ts(time.Minute), "success", t0.Add(time.Minute))
	tr.Span(b, payload{}, ts(0), ts(5*time.Second), "success", t0.Add(time.Minute))
	require.Len(t, counted, 1)
	assert.Equal(t, "x", counted[0].Payload.label)
	assert.Equal(t, int64(1), tr.TakeStats().Deduplicated)

	job, ok := tr.EvictOldestEnded()
	require.True(t, ok)
	assert.Equal(t, c, job.Key(), "c was counted first")
	assert.Empty(t, job.Runs())
	dirty := tr.Dirty()
	require.NotEmpty(t, dirty)
	assert.Contains(t, dirty, job)
}

// A job keeps one of its runs within itself; once that run is forgotten
// while a later run of the job is remembered, the job's next run takes its
// place, and neither the remembered run nor the new one is disturbed.
func TestAForgottenRunsPlaceServesTheJobsNextRun(t *testing.T) {
	var counted []Counted[payload]
	tr := New(Config[payload]{
		Timeout: time.Hour, PendingGrace: 10 * time.Second, MaxRuns: 2, TimeoutResult: "timeout",
		Own: func(p payload) payload { return p }, Fill: func(*payload, payload) {},
		Count: func(c Counted[payload]) { counted = append(counted, c) },
	})
	a, b := Key{"svc", "a"}, Key{"svc", "b"}
	run := func(key Key, label string, start time.Duration) {
		tr.Start(key, payload{label}, ts(start), t0.Add(start))
		tr.End(key, payload{}, ts(start+time.Second), "success", t0.Add(start+time.Second))
	}
	run(a, "a1", 0)
	job := tr.jobs[a]
	require.Same(t, &job.first, job.Runs()[0], "the job's first run is the one within it")
	run(a, "a2", 10*time.Second)
	require.Len(t, job.Runs(), 2)
	require.NotSame(t, job.Runs()[0], job.Runs()[1], "the place is taken while its run is remembered")
	run(b, "b1", 20*time.Second) // a's first run is the oldest counted of three: forgotten
	require.Equal(t, int64(1), tr.Stats().EvictedEnded)
	require.Len(t, job.Runs(), 1)
	second := job.Runs()[0]
	require.NotSame(t, &job.first, second)

	run(a, "a3", 30*time.Second) // the next run of a: in the first run's place
	runs := job.Runs()
	require.Len(t, runs, 1, "a's second run was forgotten in turn (two counted runs are kept)")
	assert.Same(t, &job.first, runs[0])
	assert.Equal(t, payload{"a3"}, runs[0].Payload)
	assert.Equal(t, ts(30*time.Second), runs[0].Start)

	// A late span of the run kept within the job is recognized; one of a
	// run started since is counted once.
	tr.Span(a, payload{}, ts(30*time.Second), ts(31*time.Second), "success", t0.Add(time.Minute))
	tr.Span(b, payload{}, ts(20*time.Second), ts(21*time.Second), "success", t0.Add(time.Minute))
	require.Len(t, counted, 4)
	tr.Start(a, payload{"a4"}, ts(40*time.Second), t0.Add(time.Minute))
	require.Len(t, job.Runs(), 2)
	assert.Same(t, &job.first, job.Runs()[0], "the counted run is still in its place")
	assert.Equal(t, payload{"a3"}, job.Runs()[0].Payload)
	assert.Equal(t, payload{"a4"}, job.Runs()[1].Payload)
	labels := make([]string, 0, len(counted))
	for _, c := range counted {
		labels = append(labels, c.Payload.label)
	}
	assert.Equal(t, []string{"a1", "a2", "b1", "a3"}, labels)
}

// A run active for the timeout is counted once as timed out, without a
// duration.
func TestTimeout(t *testing.T) {
	var counted []Counted[payload]
	tr := newTracker(&counted)
	tr.Start(Key{"svc", "a"}, payload{}, ts(0), t0)
	tr.Sweep(t0.Add(59*time.Minute), false)
	assert.Empty(t, counted)
	tr.Sweep(t0.Add(time.Hour), false)
	require.Len(t, counted, 1)
	assert.Equal(t, "timeout", counted[0].Result)
	assert.False(t, counted[0].HasDuration)
}

// A run is allocated on its own, thousands at a time: with the
// derivation's 32-byte payload (a pointer and a slice) it must stay within
// the 160-byte size class, which padding between its one-byte fields
// would push into the 176-byte one.
func TestRunFitsItsSizeClass(t *testing.T) {
	type payload struct {
		_ *int  // the resource
		_ []int // the dimensions
	}
	assert.LessOrEqual(t, unsafe.Sizeof(Run[payload]{}), uintptr(160))
}
