// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package nvmlsamplerextension // import "github.com/gpubuild/otelcol-gpubuild/extension/nvmlsamplerextension"

import (
	"sort"
	"time"
)

// ring keeps the newest len(buf) values, oldest first. Values are pushed in
// time order.
type ring[T any] struct {
	buf   []T
	start int
	n     int
	ts    func(*T) time.Time
}

func newRing[T any](capacity int, ts func(*T) time.Time) *ring[T] {
	return &ring[T]{buf: make([]T, capacity), ts: ts}
}

func (r *ring[T]) push(v T) {
	if r.n < len(r.buf) {
		r.buf[(r.start+r.n)%len(r.buf)] = v
		r.n++
		return
	}
	r.buf[r.start] = v
	r.start = (r.start + 1) % len(r.buf)
}

func (r *ring[T]) at(i int) *T { return &r.buf[(r.start+i)%len(r.buf)] }

// newest is the time of the newest value; ok is false when empty.
func (r *ring[T]) newest() (time.Time, bool) {
	if r.n == 0 {
		return time.Time{}, false
	}
	return r.ts(r.at(r.n - 1)), true
}

// span copies the values from the last at or before from (else the
// oldest) to the first at or after to (else the newest).
func (r *ring[T]) span(from, to time.Time) []T {
	if r.n == 0 {
		return nil
	}
	lo := sort.Search(r.n, func(i int) bool { return r.ts(r.at(i)).After(from) }) - 1
	lo = max(lo, 0)
	hi := sort.Search(r.n, func(i int) bool { return !r.ts(r.at(i)).Before(to) })
	hi = min(hi, r.n-1)
	if hi < lo {
		return nil
	}
	out := make([]T, 0, hi-lo+1)
	for i := lo; i <= hi; i++ {
		out = append(out, *r.at(i))
	}
	return out
}
