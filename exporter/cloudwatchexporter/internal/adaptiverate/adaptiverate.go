// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package adaptiverate paces requests at a rate that follows the server's
// answers, additive-increase/multiplicative-decrease as TCP does: unpaced
// (or at a configured ceiling) until the server throttles, then half the
// rate being sent, then up again by a fifth every quiet second, back to
// unpaced once well above what was being sent. CloudWatch's request quota
// is per account and region, shared by every sender, so no fixed rate is
// right for everyone.
package adaptiverate // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/adaptiverate"

import (
	"context"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

const (
	// settle is how long a rate holds before the next change: one halving
	// per burst of throttled answers, one increase per quiet second.
	settle = time.Second
	// increase is the factor of each quiet second's increase.
	increase = 1.2
	// floor is the least rate: a request every 2 s keeps probing.
	floor = 0.5
)

// Limiter is safe for concurrent use.
type Limiter struct {
	ceiling float64 // 0: none
	now     func() time.Time

	mu         sync.Mutex
	limiter    *rate.Limiter
	lastChange time.Time
	// Requests let through in the current and the previous second, to
	// measure the rate being sent when throttling starts.
	second       int64
	inSecond     int
	prevInSecond int
}

// New returns a limiter that never exceeds ceiling requests per second
// (0: no ceiling). now is the clock (time.Now outside tests).
func New(ceiling float64, now func() time.Time) *Limiter {
	l := &Limiter{ceiling: ceiling, now: now}
	l.limiter = rate.NewLimiter(rate.Inf, 1)
	if ceiling > 0 {
		l.limiter = rate.NewLimiter(rate.Limit(ceiling), burst(ceiling))
	}
	return l
}

// Wait blocks until a request may be sent, or ctx ends.
func (l *Limiter) Wait(ctx context.Context) error {
	r, now := l.reserve()
	delay := r.DelayFrom(now)
	if delay <= 0 {
		return nil
	}
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		r.CancelAt(l.now())
		return ctx.Err()
	}
}

// reserve takes the next place in the pace.
func (l *Limiter) reserve() (*rate.Reservation, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.count(now)
	l.raise(now)
	return l.limiter.ReserveN(now, 1), now
}

// Throttled reports a throttling answer: the rate halves, once per burst
// of such answers.
func (l *Limiter) Throttled() {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if now.Sub(l.lastChange) < settle {
		return
	}
	current := float64(l.limiter.Limit())
	if l.limiter.Limit() == rate.Inf {
		current = l.measured(now)
	}
	l.set(now, math.Max(floor, current/2))
}

// Limit is the rate now; 0 means unpaced.
func (l *Limiter) Limit() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.limiter.Limit() == rate.Inf {
		return 0
	}
	return float64(l.limiter.Limit())
}

// raise increases a throttled rate after a quiet second.
func (l *Limiter) raise(now time.Time) {
	limit := l.limiter.Limit()
	if limit == rate.Inf || now.Sub(l.lastChange) < settle || (l.ceiling > 0 && float64(limit) >= l.ceiling) {
		return
	}
	next := float64(limit)*increase + 1
	switch {
	case l.ceiling > 0:
		next = math.Min(next, l.ceiling)
	case next > 2*l.measured(now):
		// Well above what is being sent: pacing no longer matters.
		l.limiter.SetLimitAt(now, rate.Inf)
		l.lastChange = now
		return
	}
	l.set(now, next)
}

func (l *Limiter) set(now time.Time, perSecond float64) {
	l.limiter.SetLimitAt(now, rate.Limit(perSecond))
	l.limiter.SetBurstAt(now, burst(perSecond))
	l.lastChange = now
}

// count notes one request in its second.
func (l *Limiter) count(now time.Time) {
	s := now.Unix()
	switch s {
	case l.second:
	case l.second + 1:
		l.prevInSecond, l.inSecond = l.inSecond, 0
	default:
		l.prevInSecond, l.inSecond = 0, 0
	}
	l.second = s
	l.inSecond++
}

// measured is the rate sent over about the last second.
func (l *Limiter) measured(now time.Time) float64 {
	switch now.Unix() {
	case l.second:
		frac := float64(now.Nanosecond()) / 1e9
		return float64(l.inSecond) + float64(l.prevInSecond)*(1-frac)
	case l.second + 1:
		return float64(l.inSecond)
	}
	return floor
}

// burst lets a second's worth of requests through at once, as the fixed
// limit did.
func burst(perSecond float64) int { return max(1, int(math.Ceil(perSecond))) }
