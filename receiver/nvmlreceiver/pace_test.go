// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package nvmlreceiver

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeTimers is a manual clock: timers fire only in advance, in the
// calling goroutine, so a test knows exactly what is armed and when.
type fakeTimers struct {
	mu     sync.Mutex
	t      time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	at   time.Time
	f    func()
	done bool // fired or stopped
}

func newFakeTimers() *fakeTimers { return &fakeTimers{t: time.Unix(1_700_000_000, 0)} }

func (c *fakeTimers) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeTimers) clock() pacerClock {
	return pacerClock{now: c.now, afterFunc: func(d time.Duration, f func()) func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		tm := &fakeTimer{at: c.t.Add(d), f: f}
		c.timers = append(c.timers, tm)
		return func() bool {
			c.mu.Lock()
			defer c.mu.Unlock()
			wasArmed := !tm.done
			tm.done = true
			return wasArmed
		}
	}}
}

// advance moves the clock by d and fires every timer due by then, earliest
// first. Timers run without the clock's lock, as time.AfterFunc's do.
func (c *fakeTimers) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		var due *fakeTimer
		for _, tm := range c.timers {
			if !tm.done && !tm.at.After(c.t) && (due == nil || tm.at.Before(due.at)) {
				due = tm
			}
		}
		if due == nil {
			c.mu.Unlock()
			return
		}
		due.done = true
		c.mu.Unlock()
		due.f()
	}
}

// pending is the deadlines of the timers armed and not yet fired or stopped.
func (c *fakeTimers) pending() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []time.Time
	for _, tm := range c.timers {
		if !tm.done {
			out = append(out, tm.at)
		}
	}
	return out
}

// ticks drains the pacer's channel without waiting.
func ticks(p *pacer) int {
	n := 0
	for {
		select {
		case <-p.C():
			n++
		default:
			return n
		}
	}
}

func TestPacerTicksAtAFixedRate(t *testing.T) {
	c := newFakeTimers()
	t0 := c.now()
	p := newPacer(10*time.Second, c.clock())
	p.atRate()
	for k := 1; k <= 5; k++ {
		tick := t0.Add(time.Duration(k) * 10 * time.Second)
		require.Equal(t, []time.Time{tick}, c.pending(), "tick %d", k)
		c.advance(tick.Sub(c.now()) - time.Millisecond)
		assert.Zero(t, ticks(p), "not before the tick")
		c.advance(time.Millisecond)
		require.Equal(t, 1, ticks(p))
		c.advance(300 * time.Millisecond) // the scrape's own time does not shift the cadence
		p.atRate()
	}
}

func TestPacerSkipsMissedTicks(t *testing.T) {
	c := newFakeTimers()
	t0 := c.now()
	p := newPacer(10*time.Second, c.clock())
	p.atRate()
	c.advance(10 * time.Second)
	require.Equal(t, 1, ticks(p))
	c.advance(25 * time.Second) // a scrape that overran two ticks
	p.atRate()
	assert.Equal(t, []time.Time{t0.Add(40 * time.Second)}, c.pending(), "the ticks at 20 s and 30 s are skipped")

	c.advance(5 * time.Second)
	require.Equal(t, 1, ticks(p))
	c.advance(10 * time.Second) // ends exactly on the tick at 50 s: that one is due now
	p.atRate()
	assert.Equal(t, []time.Time{t0.Add(50 * time.Second)}, c.pending())
	c.advance(0)
	assert.Equal(t, 1, ticks(p))
}

func TestPacerWithoutGPUWaitsOnlyForTheNextAttempt(t *testing.T) {
	c := newFakeTimers()
	t0 := c.now()
	p := newPacer(10*time.Second, c.clock())
	p.atRate()
	p.after(time.Minute) // the GPUs went away: the rate timer is replaced
	assert.Equal(t, []time.Time{t0.Add(time.Minute)}, c.pending(), "one timer, for the attempt")
	for range 5 {
		c.advance(10 * time.Second)
		assert.Zero(t, ticks(p), "nothing between attempts")
	}
	c.advance(10 * time.Second)
	require.Equal(t, 1, ticks(p))

	// The attempt found a GPU: the cadence restarts from that scrape.
	c.advance(200 * time.Millisecond)
	p.atRate()
	assert.Equal(t, []time.Time{t0.Add(70*time.Second + 200*time.Millisecond)}, c.pending())
}

func TestPacerShutdownStopsTicks(t *testing.T) {
	c := newFakeTimers()
	p := newPacer(10*time.Second, c.clock())
	p.atRate()
	p.shutdown()
	assert.Empty(t, c.pending(), "the armed timer is stopped")
	p.atRate()
	p.after(time.Second)
	assert.Empty(t, c.pending(), "nothing is armed after shutdown")
	c.advance(time.Hour)
	assert.Zero(t, ticks(p))
}

// TestPacerLateTimerSendsNothing: a timer that was already firing when it
// was stopped or replaced (time.AfterFunc's Stop returns false then) must
// not send a tick.
func TestPacerLateTimerSendsNothing(t *testing.T) {
	var fires []func()
	clock := pacerClock{
		now: time.Now,
		afterFunc: func(_ time.Duration, f func()) func() bool {
			fires = append(fires, f)
			return func() bool { return false }
		},
	}
	p := newPacer(10*time.Second, clock)
	p.atRate()
	p.after(time.Minute)
	fires[0]()
	assert.Zero(t, ticks(p), "a replaced timer")
	fires[1]()
	assert.Equal(t, 1, ticks(p), "the armed timer")

	p.atRate()
	p.shutdown()
	fires[2]()
	assert.Zero(t, ticks(p), "a timer firing after shutdown")
}
