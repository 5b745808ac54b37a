// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package adaptiverate

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// clock is a manual clock.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func newClock() *clock { return &clock{t: time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)} }

// send lets n requests through, spread evenly over d, and returns how
// long the pace made the last one wait.
func send(l *Limiter, c *clock, n int, d time.Duration) time.Duration {
	var delay time.Duration
	for i := 0; i < n; i++ {
		r, now := l.reserve()
		delay = r.DelayFrom(now)
		c.advance(d / time.Duration(n))
	}
	return delay
}

func TestUnpacedUntilThrottled(t *testing.T) {
	c := newClock()
	l := New(0, c.now)
	assert.Zero(t, send(l, c, 1000, 0), "no ceiling, no throttling: nothing waits")
	assert.Zero(t, l.Limit())
}

func TestCeiling(t *testing.T) {
	c := newClock()
	l := New(10, c.now)
	assert.Zero(t, send(l, c, 10, 0), "a second's worth goes at once")
	r, now := l.reserve()
	assert.Equal(t, 100*time.Millisecond, r.DelayFrom(now), "the 11th waits a tenth of a second")
	assert.Equal(t, 10.0, l.Limit())
}

func TestThrottlingHalvesTheRateBeingSent(t *testing.T) {
	c := newClock()
	l := New(0, c.now)
	send(l, c, 200, 2*time.Second) // 100 requests/s
	l.Throttled()
	assert.InDelta(t, 50, l.Limit(), 5, "half of about 100/s")

	// The other throttled answers of the same burst do not halve again.
	l.Throttled()
	l.Throttled()
	assert.InDelta(t, 50, l.Limit(), 5)

	c.advance(1100 * time.Millisecond)
	l.Throttled()
	assert.InDelta(t, 25, l.Limit(), 3, "throttled again a second later: halved again")
}

func TestQuietSecondsRaiseTheRateBackToUnpaced(t *testing.T) {
	c := newClock()
	l := New(0, c.now)
	send(l, c, 100, time.Second)
	l.Throttled()
	throttled := l.Limit()
	require.Positive(t, throttled)

	prev := throttled
	for s := 0; s < 30 && l.Limit() != 0; s++ {
		send(l, c, 20, time.Second) // the demand: 20/s, well under the pace
		if l.Limit() != 0 {
			assert.GreaterOrEqual(t, l.Limit(), prev, "the rate only goes up while nothing is throttled")
			prev = l.Limit()
		}
	}
	assert.Zero(t, l.Limit(), "back to unpaced once far above the 20/s being sent")
}

func TestRaiseStopsAtTheCeiling(t *testing.T) {
	c := newClock()
	l := New(40, c.now)
	send(l, c, 40, time.Second)
	l.Throttled()
	assert.InDelta(t, 20, l.Limit(), 3)
	for s := 0; s < 20; s++ {
		send(l, c, 30, time.Second)
	}
	assert.Equal(t, 40.0, l.Limit(), "up to the ceiling and no further")
}

func TestFloor(t *testing.T) {
	c := newClock()
	l := New(0, c.now)
	send(l, c, 10, time.Second)
	for s := 0; s < 20; s++ {
		l.Throttled()
		c.advance(1100 * time.Millisecond)
	}
	assert.Equal(t, floor, l.Limit(), "never below one request every 2 s")
}

func TestWaitHonoursContext(t *testing.T) {
	l := New(1, time.Now)
	require.NoError(t, l.Wait(context.Background()), "the first request goes at once")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, l.Wait(ctx), context.Canceled, "the second would wait a second; the caller gave up")
}

func TestThrottledRatePacesRequests(t *testing.T) {
	c := newClock()
	l := New(0, c.now)
	send(l, c, 100, time.Second)
	l.Throttled()
	limit := l.Limit()
	require.InDelta(t, 50, limit, 5)
	wait := send(l, c, 50, 0) // 50 at the same instant
	assert.InDelta(t, (49/limit)*float64(time.Second), float64(wait), float64(100*time.Millisecond),
		"the 50th of a burst waits for its place at the halved rate")
}
