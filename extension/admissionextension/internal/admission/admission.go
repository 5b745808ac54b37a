// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package admission is a counting gate: a bounded number of holders, a
// bounded number of waiters, each waiting at most a timeout.
package admission // import "github.com/gpubuild/otelcol-gpubuild/extension/admissionextension/internal/admission"

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// ErrBusy is returned when no place is free within the wait timeout, or too many already wait.
var ErrBusy = errors.New("too many requests in flight")

// Gate is safe for concurrent use.
type Gate struct {
	slots      chan struct{}
	maxWaiting int64
	waiting    atomic.Int64
	timeout    time.Duration
}

// New returns a gate of maxInFlight places and maxWaiting waiters.
func New(maxInFlight, maxWaiting int, timeout time.Duration) *Gate {
	return &Gate{slots: make(chan struct{}, maxInFlight), maxWaiting: int64(maxWaiting), timeout: timeout}
}

// Acquire takes a place, waiting up to the timeout (or ctx); release gives it back.
func (g *Gate) Acquire(ctx context.Context) (release func(), err error) {
	release = func() { <-g.slots }
	select {
	case g.slots <- struct{}{}:
		return release, nil
	default:
	}
	if g.waiting.Add(1) > g.maxWaiting {
		g.waiting.Add(-1)
		return nil, ErrBusy
	}
	defer g.waiting.Add(-1)
	timer := time.NewTimer(g.timeout)
	defer timer.Stop()
	select {
	case g.slots <- struct{}{}:
		return release, nil
	case <-timer.C:
		return nil, ErrBusy
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TryAcquire takes a place if one is free now, without waiting; release
// gives it back (calling it again does nothing).
func (g *Gate) TryAcquire() (release func(), ok bool) {
	select {
	case g.slots <- struct{}{}:
		var once sync.Once
		return func() { once.Do(func() { <-g.slots }) }, true
	default:
		return nil, false
	}
}

// Full tells whether a new request would have to wait beyond the waiters' bound.
func (g *Gate) Full() bool {
	return len(g.slots) == cap(g.slots) && g.waiting.Load() >= g.maxWaiting
}
