// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derive

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
)

func TestBoundaries(t *testing.T) {
	b := boundaries{origin: t0, interval: 10 * time.Second}
	assert.Equal(t, at(10*time.Second), b.ceil(t0), "the first boundary is one interval after the start")
	assert.Equal(t, at(10*time.Second), b.ceil(at(10*time.Second)))
	assert.Equal(t, at(20*time.Second), b.ceil(at(10*time.Second+1)))
	assert.Equal(t, t0, b.floor(at(5*time.Second)))
	assert.Equal(t, at(10*time.Second), b.floor(at(15*time.Second)))
	assert.Equal(t, at(10*time.Second), b.next(time.Time{}, at(3*time.Second), t0), "due now: the next boundary")
	assert.Equal(t, at(20*time.Second), b.next(time.Time{}, at(10*time.Second), at(10*time.Second)), "never twice at one boundary")
	assert.Equal(t, at(100*time.Second), b.next(at(95*time.Second), at(12*time.Second), at(10*time.Second)), "a deadline: its boundary")
}

// scheduledEmitter is a test emitter whose boundaries start at t0, as
// start sets them, without the loop: the test calls arm as the loop does.
func scheduledEmitter(t *testing.T, next *scriptedConsumer) (*testEmitter, *testService) {
	te := newTestEmitter(t, newConnectorDeriver(testConfig(), t0), 10*time.Second, next)
	te.bounds = boundaries{origin: t0, interval: 10 * time.Second}
	te.wake = make(chan struct{}, 1)
	return te, newTestService(t, newOTLPSink(t))
}

func (te *testEmitter) armAt(now, last time.Time) (time.Time, bool) {
	te.clock = now
	at, _, armed := te.arm(last)
	return at, armed
}

// A derivation with nothing derived, nothing running and nothing
// remembered arms no timer: it sleeps until a batch comes.
func TestIdleDerivationArmsNothing(t *testing.T) {
	te, _ := scheduledEmitter(t, &scriptedConsumer{})
	_, armed := te.armAt(at(time.Second), t0)
	assert.False(t, armed)
	assert.True(t, te.armedAt.IsZero())
	assert.Empty(t, te.wake)
}

// A batch that derives something wakes a sleeping loop for the next
// boundary; its points leave there, starting at the boundary before, as
// with a flush at every boundary. Then the loop sleeps again.
func TestWorkArmsTheNextBoundary(t *testing.T) {
	next := &scriptedConsumer{}
	te, svc := scheduledEmitter(t, next)
	_, armed := te.armAt(at(time.Second), t0)
	require.False(t, armed)

	svc.request("POST", "/_build", 202, at(41*time.Second), at(41250*time.Millisecond))
	te.consumeTraces(svc.traces(), at(47*time.Second))
	require.Len(t, te.wake, 1, "the batch wakes the loop")
	assert.Equal(t, at(50*time.Second), te.armedAt)
	got, armed := te.armAt(at(47*time.Second), t0)
	require.True(t, armed)
	assert.Equal(t, at(50*time.Second), got)

	require.NoError(t, te.flushAt(at(50*time.Second)))
	accepted := next.acceptedPoints()
	require.Len(t, accepted, 1)
	p := one(t, accepted[0], metricAPIRequests, attrs("http.route", "/_build", "http.request.method", "POST", "http.response.status_class", "2xx"))
	assert.Equal(t, int64(1), p.value)
	assert.Equal(t, ts(at(40*time.Second)), p.start, "from the boundary before the batch")
	assert.Equal(t, ts(at(50*time.Second)), p.ts)

	_, armed = te.armAt(at(50*time.Second), at(50*time.Second))
	assert.False(t, armed, "nothing left: asleep again")
}

// A refused flush is retried at the next boundary.
func TestCarriedOverArmsTheNextBoundary(t *testing.T) {
	next := &scriptedConsumer{script: []error{errQueueFull}}
	te, svc := scheduledEmitter(t, next)
	svc.request("POST", "/_build", 202, at(time.Second), at(1250*time.Millisecond))
	te.consumeTraces(svc.traces(), at(2*time.Second))
	require.ErrorIs(t, te.flushAt(at(10*time.Second)), errQueueFull)
	got, armed := te.armAt(at(10*time.Second), at(10*time.Second))
	require.True(t, armed)
	assert.Equal(t, at(20*time.Second), got)
}

// A running job arms every boundary (build.jobs.active reports it, and its
// job_timeout may come); a counted run arms the boundary where the run
// memory forgets it.
func TestRunsArmTheirBoundaries(t *testing.T) {
	te, svc := scheduledEmitter(t, &scriptedConsumer{})
	timeout := testConfig().JobTimeout

	svc.status("job-1", running, at(3*time.Second))
	te.clock = at(4 * time.Second)
	te.update(context.Background(), func(d *deriver, now time.Time) { d.consumeLogs(svc.logs(), now) })
	require.Len(t, te.wake, 1)
	require.NoError(t, te.flushAt(at(10*time.Second)))
	got, armed := te.armAt(at(10*time.Second), at(10*time.Second))
	require.True(t, armed)
	assert.Equal(t, at(20*time.Second), got, "a running job: every boundary")

	<-te.wake
	svc.jobSpan("job-1", at(3*time.Second), at(14*time.Second), codes.Unset)
	te.consumeTraces(svc.traces(), at(15*time.Second))
	require.NoError(t, te.flushAt(at(20*time.Second)))
	require.NoError(t, te.flushAt(at(30*time.Second))) // build.jobs.active 0, once
	got, armed = te.armAt(at(30*time.Second), at(30*time.Second))
	require.True(t, armed)
	assert.Equal(t, te.bounds.ceil(at(15*time.Second).Add(timeout)), got, "the counted run is forgotten job_timeout after it was counted")
	require.NoError(t, te.flushAt(got))
	assert.Zero(t, te.d.jobs.Jobs())
	_, armed = te.armAt(got, got)
	assert.False(t, armed)
}
