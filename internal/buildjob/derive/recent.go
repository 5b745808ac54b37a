// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derive

import (
	"hash/maphash"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// recentSpansPerJob sizes the memory of recent stage spans: a build has
// about four stages, so 4 x max_active_jobs spans cover that many builds.
const recentSpansPerJob = 4

// spanIdentity is a span's trace id and span id.
type spanIdentity [24]byte

func newSpanIdentity(trace pcommon.TraceID, span pcommon.SpanID) spanIdentity {
	var id spanIdentity
	copy(id[:16], trace[:])
	copy(id[16:], span[:])
	return id
}

// recentSpans remembers the last capacity span identities, so a redelivered
// stage span (an exporter retrying a batch) is counted once. The oldest
// identity is forgotten first.
//
// The identities are kept once, in arrival order in a ring; an
// open-addressing index finds them. A map of identities beside the ring
// would hold every identity twice (2.9 MB instead of 1.5 MB at 40,000:
// BenchmarkRecentSpans), and a hash alone instead of the identity could
// take a new span for a redelivered one. Each index slot keeps the
// identity's hash beside its ring position: a removal moves slots back
// without hashing their identities again, and a probe reads the ring only
// where the hashes agree (the ring is 1 MB at 40,000, so each read is
// likely a cache miss).
type recentSpans struct {
	capacity int
	ring     []spanIdentity
	next     int // when the ring is full: the oldest, replaced next

	// index holds hash<<32 | ring position + 1 (0: a free slot), placed by
	// linear probing from the hash; it is kept at most 3/4 full.
	index []uint64
	seed  maphash.Seed
}

func newRecentSpans(capacity int) *recentSpans {
	return &recentSpans{capacity: max(capacity, 1), index: make([]uint64, 16), seed: maphash.MakeSeed()}
}

// add records id and reports whether it was new.
func (r *recentSpans) add(id spanIdentity) bool {
	mask := len(r.index) - 1
	h := r.hash(&id)
	i := int(h) & mask
	for ; r.index[i] != 0; i = (i + 1) & mask {
		if s := r.index[i]; uint32(s>>32) == h && r.ring[uint32(s)-1] == id {
			return false
		}
	}
	if len(r.ring) == r.capacity {
		// Replace the oldest; removing its slot may move the free slot
		// found above, so id's slot is looked for again.
		r.remove(r.next)
		r.ring[r.next] = id
		r.place(r.next, h)
		r.next = (r.next + 1) % r.capacity
		return true
	}
	r.ring = append(r.ring, id)
	if len(r.ring)*4 > len(r.index)*3 {
		r.grow()
		r.place(len(r.ring)-1, h)
	} else {
		r.index[i] = slot(h, len(r.ring)-1)
	}
	return true
}

func (r *recentSpans) hash(id *spanIdentity) uint32 {
	return uint32(maphash.Bytes(r.seed, id[:]))
}

// slot is the index entry of ring position pos, whose identity hashes to h.
func slot(h uint32, pos int) uint64 {
	return uint64(h)<<32 | uint64(pos+1)
}

// place indexes ring position pos in the first free slot of its probe,
// which starts at the slot h selects.
func (r *recentSpans) place(pos int, h uint32) {
	mask := len(r.index) - 1
	i := int(h) & mask
	for r.index[i] != 0 {
		i = (i + 1) & mask
	}
	r.index[i] = slot(h, pos)
}

// remove takes ring position pos out of the index, moving back the slots
// after it that would otherwise no longer be reached from their home
// (deletion without tombstones, so probes stay as short as the load).
func (r *recentSpans) remove(pos int) {
	mask := len(r.index) - 1
	i := int(r.hash(&r.ring[pos])) & mask
	for uint32(r.index[i]) != uint32(pos+1) {
		i = (i + 1) & mask
	}
	for j := (i + 1) & mask; r.index[j] != 0; j = (j + 1) & mask {
		// The entry at j may fill the hole at i unless its home lies
		// cyclically in (i, j]: then it would be probed for past i only.
		home := int(r.index[j]>>32) & mask
		if (j-home)&mask >= (j-i)&mask {
			r.index[i] = r.index[j]
			i = j
		}
	}
	r.index[i] = 0
}

// grow doubles the index and places the indexed positions again.
func (r *recentSpans) grow() {
	old := r.index
	r.index = make([]uint64, 2*len(old))
	for _, s := range old {
		if s != 0 {
			r.place(int(uint32(s))-1, uint32(s>>32))
		}
	}
}
