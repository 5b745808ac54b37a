// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package memory

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
)

// fake is a heap reader, collector and clock the test drives.
type fake struct {
	heap, afterGC uint64
	reads, gcs    int
	now           time.Time
}

func (f *fake) guard() *Guard {
	return New(Limits{Hard: 100, Soft: 80, CheckInterval: time.Second, SoftGCInterval: 10 * time.Second, HardGCInterval: 2 * time.Second},
		func() uint64 { f.reads++; return f.heap },
		func() { f.gcs++; f.heap = f.afterGC },
		func() time.Time { return f.now }, zap.NewNop())
}

// The heap is read only when a request asks, at most once per
// check_interval: however long the process stays idle, nothing is read.
func TestHeapIsReadOnlyOnRequestsAtMostOncePerInterval(t *testing.T) {
	f := &fake{heap: 10, now: time.Unix(1000, 0)}
	g := f.guard()
	f.now = f.now.Add(time.Hour) // idle
	assert.Equal(t, 0, f.reads, "no reading without a request")

	for range 50 {
		assert.False(t, g.Refuse())
	}
	assert.Equal(t, 1, f.reads, "one reading serves the requests of the next interval")

	f.heap = 90
	f.now = f.now.Add(999 * time.Millisecond)
	assert.False(t, g.Refuse(), "the last reading stands within the interval")
	assert.Equal(t, 1, f.reads)
	f.now = f.now.Add(time.Millisecond)
	f.afterGC = 90 // nothing collectable
	assert.True(t, g.Refuse(), "read again once the interval is over")
	assert.Equal(t, 1, f.gcs, "above the soft limit a collection is tried")
}

// At or above the soft limit requests are refused; a collection is forced
// at most once per min_gc_interval_when_soft_limited, and refusal ends as
// soon as a reading is under the soft limit.
func TestSoftLimitRefusesAndCollectsRarely(t *testing.T) {
	f := &fake{heap: 80, afterGC: 85, now: time.Unix(1000, 0)}
	g := f.guard()
	f.now = f.now.Add(10 * time.Second)
	assert.True(t, g.Refuse(), "at the soft limit")
	assert.Equal(t, 1, f.gcs)
	for range 9 {
		f.now = f.now.Add(time.Second)
		assert.True(t, g.Refuse())
	}
	assert.Equal(t, 1, f.gcs, "no second collection within 10 s")
	f.now = f.now.Add(time.Second)
	f.afterGC = 20
	assert.False(t, g.Refuse(), "the collection brought the heap under the soft limit")
	assert.Equal(t, 2, f.gcs)
	f.now = f.now.Add(time.Second)
	f.heap = 79
	assert.False(t, g.Refuse())
	assert.Equal(t, 2, f.gcs, "no collection under the soft limit")
}

// Above the hard limit a collection is forced at most once per
// min_gc_interval_when_hard_limited, and the heap is read again after it.
func TestHardLimitForcesACollection(t *testing.T) {
	f := &fake{heap: 150, afterGC: 120, now: time.Unix(1000, 0)}
	g := f.guard()
	f.now = f.now.Add(2 * time.Second)
	assert.True(t, g.Refuse())
	require.Equal(t, 1, f.gcs)
	assert.Equal(t, 2, f.reads, "read again after the collection")

	f.heap = 150
	f.now = f.now.Add(time.Second)
	assert.True(t, g.Refuse())
	assert.Equal(t, 1, f.gcs, "within min_gc_interval_when_hard_limited")
	f.now = f.now.Add(time.Second)
	f.afterGC = 50
	assert.False(t, g.Refuse(), "the second collection freed enough")
	assert.Equal(t, 2, f.gcs)
}

// The production reader reads the figure memory_limiter compares.
func TestReadHeapReadsTheHeap(t *testing.T) {
	keep := make([]byte, 8<<20)
	assert.GreaterOrEqual(t, ReadHeap(), uint64(len(keep)), "an 8 MiB allocation shows")
	runtime.KeepAlive(keep)
}

// Requests arriving at once share one reading: the heap is read once
// however many ask within the interval.
func TestConcurrentRequestsShareAReading(t *testing.T) {
	var reads atomic.Int64
	g := New(Limits{Hard: 100, Soft: 80, CheckInterval: time.Hour, SoftGCInterval: time.Hour, HardGCInterval: time.Hour},
		func() uint64 { reads.Add(1); return 10 }, func() {}, nil, zap.NewNop())
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				assert.False(t, g.Refuse())
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int64(1), reads.Load())
}
