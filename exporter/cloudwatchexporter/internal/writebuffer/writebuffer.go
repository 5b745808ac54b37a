// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package writebuffer holds, in memory and in order, what the persistent
// sending queue could not write to its storage, up to a bound in bytes,
// and paces the attempts to write it again.
package writebuffer // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/writebuffer"

import (
	"sync/atomic"
	"time"
)

// Buffer is a FIFO of items bounded by the sum of their sizes. It is not
// safe for concurrent use, except Bytes and Len, which any goroutine may read.
type Buffer[T any] struct {
	limit      int64
	items      []entry[T]
	bytes      atomic.Int64
	count      atomic.Int64
	minBackoff time.Duration
	maxBackoff time.Duration
	backoff    time.Duration
	next       time.Time
}

type entry[T any] struct {
	item T
	size int64
}

// New returns an empty Buffer holding at most limit bytes. After a failed
// attempt the next one is due minBackoff later, doubling up to maxBackoff.
func New[T any](limit int64, minBackoff, maxBackoff time.Duration) *Buffer[T] {
	return &Buffer[T]{limit: limit, minBackoff: minBackoff, maxBackoff: maxBackoff}
}

// Limit is the bound in bytes.
func (b *Buffer[T]) Limit() int64 { return b.limit }

// Push appends item of size bytes. It returns false, holding nothing, when
// the item does not fit in what is left of the bound.
func (b *Buffer[T]) Push(item T, size int64) bool {
	if b.bytes.Load()+size > b.limit {
		return false
	}
	if len(b.items) == 0 {
		// The first item starts a failure episode: the next attempt is due
		// after the shortest wait.
		b.backoff = 0
	}
	b.items = append(b.items, entry[T]{item: item, size: size})
	b.bytes.Add(size)
	b.count.Add(1)
	return true
}

// Head is the oldest item; ok is false when the buffer is empty.
func (b *Buffer[T]) Head() (item T, ok bool) {
	if len(b.items) == 0 {
		return item, false
	}
	return b.items[0].item, true
}

// Pop removes the oldest item (after it was written) and makes the next
// attempt due at once.
func (b *Buffer[T]) Pop() {
	if len(b.items) == 0 {
		return
	}
	b.bytes.Add(-b.items[0].size)
	b.count.Add(-1)
	var zero entry[T]
	b.items[0] = zero
	b.items = b.items[1:]
	b.backoff = 0
	b.next = time.Time{}
}

// Len is the number of items held.
func (b *Buffer[T]) Len() int { return int(b.count.Load()) }

// Bytes is the sum of the sizes of the items held.
func (b *Buffer[T]) Bytes() int64 { return b.bytes.Load() }

// Due tells whether an attempt to write the held items may be made at now.
func (b *Buffer[T]) Due(now time.Time) bool { return !now.Before(b.next) }

// Failed records a failed attempt at now: the next is due after the
// current backoff, which doubles up to the maximum.
func (b *Buffer[T]) Failed(now time.Time) {
	b.backoff = min(max(2*b.backoff, b.minBackoff), b.maxBackoff)
	b.next = now.Add(b.backoff)
}
