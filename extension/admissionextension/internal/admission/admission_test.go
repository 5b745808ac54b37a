// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package admission

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGateBoundsHoldersAndWaiters(t *testing.T) {
	g := New(2, 1, time.Minute)
	r1, err := g.Acquire(context.Background())
	require.NoError(t, err)
	r2, err := g.Acquire(context.Background())
	require.NoError(t, err)

	got := make(chan error, 1)
	go func() {
		release, err := g.Acquire(context.Background())
		if err == nil {
			release()
		}
		got <- err
	}()
	require.Eventually(t, func() bool { return g.Full() }, 10*time.Second, time.Millisecond, "one waiter")
	_, err = g.Acquire(context.Background())
	assert.ErrorIs(t, err, ErrBusy, "past the waiters' bound: refused at once")

	r1()
	require.NoError(t, <-got, "the waiter got the freed place")
	r2()
	assert.False(t, g.Full())
}

func TestGateWaitTimesOut(t *testing.T) {
	g := New(1, 4, 20*time.Millisecond)
	release, err := g.Acquire(context.Background())
	require.NoError(t, err)
	defer release()
	_, err = g.Acquire(context.Background())
	assert.ErrorIs(t, err, ErrBusy)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	g2 := New(1, 4, time.Minute)
	r, _ := g2.Acquire(context.Background())
	defer r()
	_, err = g2.Acquire(ctx)
	assert.ErrorIs(t, err, context.Canceled)
}

func TestGateNeverExceedsItsBound(t *testing.T) {
	g := New(3, 100, time.Minute)
	var inside, most atomic.Int64
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			release, err := g.Acquire(context.Background())
			if !assert.NoError(t, err) {
				return
			}
			n := inside.Add(1)
			for {
				m := most.Load()
				if n <= m || most.CompareAndSwap(m, n) {
					break
				}
			}
			time.Sleep(time.Millisecond) // hold the place while others contend
			inside.Add(-1)
			release()
		}()
	}
	wg.Wait()
	assert.LessOrEqual(t, most.Load(), int64(3))
	assert.Positive(t, most.Load())
}

func TestTryAcquireNeverWaits(t *testing.T) {
	g := New(1, 4, time.Minute)
	release, ok := g.TryAcquire()
	require.True(t, ok)
	_, ok = g.TryAcquire()
	assert.False(t, ok, "no free place: refused at once")
	release()
	release() // a second call gives back nothing more
	r2, ok := g.TryAcquire()
	require.True(t, ok)
	_, ok = g.TryAcquire()
	assert.False(t, ok, "the double release did not make a second place")
	r2()
}
