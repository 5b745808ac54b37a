// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package memory decides whether a request may enter, from the Go heap read
// when requests arrive (never by a timer, so an idle process is not woken).
package memory // import "github.com/gpubuild/otelcol-gpubuild/extension/admissionextension/internal/memory"

import (
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// heapObjects is what memory_limiter compares (runtime.MemStats.Alloc),
// read without ReadMemStats' stop-the-world.
const heapObjects = "/memory/classes/heap/objects:bytes"

// ReadHeap returns the bytes of heap objects (live, and dead not yet swept).
func ReadHeap() uint64 {
	s := []metrics.Sample{{Name: heapObjects}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// Limits are the guard's settings.
type Limits struct {
	// Hard: above it a collection is forced (at most once per HardGCInterval).
	Hard uint64
	// Soft (Hard minus the spike allowance): at or above it requests are refused.
	Soft uint64
	// CheckInterval: a reading serves the requests of the next CheckInterval.
	CheckInterval time.Duration
	// SoftGCInterval, HardGCInterval: the least time between forced
	// collections above the soft and the hard limit. Refusing stops the
	// allocation that would trigger the runtime's own collection, so the
	// dead objects would otherwise keep the heap above the soft limit.
	SoftGCInterval, HardGCInterval time.Duration
}

// Guard is safe for concurrent use.
type Guard struct {
	limits Limits
	read   func() uint64
	gc     func()
	now    func() time.Time
	logger *zap.Logger

	refuse   atomic.Bool
	nextRead atomic.Int64 // unix nanoseconds before which the last reading stands

	mu     sync.Mutex // one reader at a time; the others use the last reading
	lastGC time.Time
}

// New returns a guard that reads the heap with read (ReadHeap in production)
// and collects with gc (runtime.GC).
func New(l Limits, read func() uint64, gc func(), now func() time.Time, logger *zap.Logger) *Guard {
	if gc == nil {
		gc = runtime.GC
	}
	if now == nil {
		now = time.Now
	}
	return &Guard{limits: l, read: read, gc: gc, now: now, logger: logger, lastGC: now()}
}

// Refuse tells whether a request arriving now must be refused. It reads the
// heap at most once per CheckInterval, and only when called.
func (g *Guard) Refuse() bool {
	now := g.now()
	if now.UnixNano() < g.nextRead.Load() || !g.mu.TryLock() {
		return g.refuse.Load()
	}
	defer g.mu.Unlock()
	if now.UnixNano() < g.nextRead.Load() {
		return g.refuse.Load()
	}
	heap := g.read()
	gcInterval := g.limits.SoftGCInterval
	if heap >= g.limits.Hard {
		gcInterval = g.limits.HardGCInterval
	}
	if heap >= g.limits.Soft && now.Sub(g.lastGC) >= gcInterval {
		before := heap
		g.gc()
		g.lastGC = g.now()
		heap = g.read()
		g.logger.Info("Heap above the admission soft limit: forced a garbage collection.",
			zap.Uint64("heap_before_mib", before>>20), zap.Uint64("heap_after_mib", heap>>20))
	}
	refuse := heap >= g.limits.Soft
	if was := g.refuse.Swap(refuse); was != refuse {
		if refuse {
			g.logger.Warn("Heap above the admission soft limit: refusing OTLP requests (retryable).", zap.Uint64("heap_mib", heap>>20))
		} else {
			g.logger.Info("Heap back under the admission soft limit: admitting OTLP requests.", zap.Uint64("heap_mib", heap>>20))
		}
	}
	g.nextRead.Store(g.now().Add(g.limits.CheckInterval).UnixNano())
	return refuse
}
