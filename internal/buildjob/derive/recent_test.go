// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derive

import (
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/benchmem"
)

// fifoSet is what recentSpans must behave as: a set of the last capacity
// identities added.
type fifoSet struct {
	capacity int
	order    []spanIdentity
	set      map[spanIdentity]bool
}

func (f *fifoSet) add(id spanIdentity) bool {
	if f.set[id] {
		return false
	}
	if len(f.order) == f.capacity {
		delete(f.set, f.order[0])
		f.order = f.order[1:]
	}
	f.order = append(f.order, id)
	f.set[id] = true
	return true
}

// identityNumber makes distinct identities from small numbers: even ones
// differ in the trace id, odd ones in the span id.
func identityNumber(n int) spanIdentity {
	var id spanIdentity
	part := n % 2 * 16 // the trace id, or the span id
	id[part] = 1
	id[part+1] = byte(n / 2)
	id[part+2] = byte(n / 512)
	return id
}

// checkIndex fails unless every remembered identity is found from its home
// slot without crossing a free slot, and the index holds nothing else.
func checkIndex(t *testing.T, r *recentSpans) {
	t.Helper()
	used := 0
	for _, v := range r.index {
		if v != 0 {
			used++
		}
	}
	if used != len(r.ring) {
		t.Fatalf("%d index slots used for %d remembered identities", used, len(r.ring))
	}
	mask := len(r.index) - 1
	for pos := range r.ring {
		h := r.hash(&r.ring[pos])
		i := int(h) & mask
		for r.index[i] != slot(h, pos) {
			if r.index[i] == 0 {
				t.Fatalf("ring position %d not reachable from its home slot", pos)
			}
			i = (i + 1) & mask
		}
	}
	if len(r.ring)*4 > len(r.index)*3 {
		t.Fatalf("index of %d slots more than 3/4 full with %d", len(r.index), len(r.ring))
	}
}

func TestRecentSpansForgetTheOldestFirst(t *testing.T) {
	r := newRecentSpans(3)
	a, b, c, d := identityNumber(1), identityNumber(2), identityNumber(3), identityNumber(4)
	for _, id := range []spanIdentity{a, b, c} {
		if !r.add(id) {
			t.Fatalf("%x: new identity taken for a redelivery", id)
		}
	}
	if r.add(a) || r.add(b) || r.add(c) {
		t.Fatal("a redelivered identity taken for a new one")
	}
	if !r.add(d) { // forgets a
		t.Fatal("a fourth identity taken for a redelivery")
	}
	if r.add(b) || r.add(c) || r.add(d) {
		t.Fatal("one of the last three identities forgotten")
	}
	if !r.add(a) {
		t.Fatal("the oldest identity still remembered past the capacity")
	}
	checkIndex(t, r)
}

// Identities that differ only in the trace id, or only in the span id, are
// different spans.
func TestRecentSpansTellTraceAndSpanIdsApart(t *testing.T) {
	r := newRecentSpans(10)
	var sameSpan1, sameSpan2, sameTrace1, sameTrace2 spanIdentity
	sameSpan1[0], sameSpan2[0] = 1, 2     // trace ids differ
	sameTrace1[16], sameTrace2[16] = 1, 2 // span ids differ
	for _, id := range []spanIdentity{sameSpan1, sameSpan2, sameTrace1, sameTrace2} {
		if !r.add(id) {
			t.Fatalf("%x taken for a redelivery", id)
		}
	}
}

// Random streams with many repeats, against the first-in first-out model,
// through index growth, full rings and every removal case of linear
// probing (small capacities keep clusters long and wrapping).
func TestRecentSpansMatchTheirModel(t *testing.T) {
	for _, capacity := range []int{1, 2, 3, 7, 12, 100, 1000} {
		rng := rand.New(rand.NewPCG(uint64(capacity), 7))
		r := newRecentSpans(capacity)
		model := &fifoSet{capacity: capacity, set: map[spanIdentity]bool{}}
		universe := 3*capacity + 2
		for step := range 50 * capacity {
			id := identityNumber(rng.IntN(universe))
			if got, want := r.add(id), model.add(id); got != want {
				t.Fatalf("capacity %d, step %d: add(%x) = %v, want %v", capacity, step, id, got, want)
			}
			if step%(capacity/4+1) == 0 {
				checkIndex(t, r)
			}
		}
		checkIndex(t, r)
	}
}

// BenchmarkRecentSpans reports the time of one add at the default capacity
// (10,000 jobs) once it is full, and the heap kept per remembered identity.
func BenchmarkRecentSpans(b *testing.B) {
	const capacity = recentSpansPerJob * 10_000
	ids := make([]spanIdentity, 2*capacity)
	for i := range ids {
		ids[i] = newSpanIdentity(benchIDs(i))
	}
	perID := float64(benchmem.Retained(func() any {
		r := newRecentSpans(capacity)
		for _, id := range ids[:capacity] {
			r.add(id)
		}
		return r
	})) / capacity
	r := newRecentSpans(capacity)
	for _, id := range ids[:capacity] {
		r.add(id)
	}
	i := 0
	for b.Loop() {
		r.add(ids[i]) // half redeliveries, half new identities
		i = (i + 1) % len(ids)
	}
	runtime.KeepAlive(ids)
	b.ReportMetric(perID, "heap_bytes/id")
}
