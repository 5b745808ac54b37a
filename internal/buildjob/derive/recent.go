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
// open-addressing index of ring positions finds them. A map of identities
// beside the ring would hold every identity twice (2.9 MB instead of 1.5 MB
// at 40,000: BenchmarkRecentSpans), and a hash alone instead of the
// identity could take a new span for a redelivered one.
type recentSpans struct {
	capacity int
	ring     []spanIdentity
	next     int // when the ring is full: the oldest, replaced next

	// index holds ring position + 1 (0: a free slot), placed by linear
	// probing from the identity's hash; it is kept at most 3/4 full.
	index []uint32
	seed  maphash.Seed
}

func newRecentSpans(capacity int) *recentSpans {
	return &recentSpans{capacity: max(capacity, 1), index: make([]uint32, 16), seed: maphash.MakeSeed()}
}

// add records id and reports whether it was new.
func (r *recentSpans) add(id spanIdentity) bool {
	mask := len(r.index) - 1
	home := r.home(&id)
	i := home
	for ; r.index[i] != 0; i = (i + 1) & mask {
		if r.ring[r.index[i]-1] == id {
			return false
		}
	}
	if len(r.ring) == r.capacity {
		// Replace the oldest; removing its slot may move the free slot
		// found above, so id's slot is looked for again.
		r.remove(r.next)
		r.ring[r.next] = id
		r.place(r.next, home)
		r.next = (r.next + 1) % r.capacity
		return true
	}
	r.ring = append(r.ring, id)
	if len(r.ring)*4 > len(r.index)*3 {
		r.grow()
	} else {
		r.index[i] = uint32(len(r.ring))
	}
	return true
}

// home is the slot where id's probe starts.
func (r *recentSpans) home(id *spanIdentity) int {
	return int(maphash.Bytes(r.seed, id[:])) & (len(r.index) - 1)
}

// place indexes ring position pos in the first free slot of its probe,
// which starts at home.
func (r *recentSpans) place(pos, home int) {
	mask := len(r.index) - 1
	i := home
	for r.index[i] != 0 {
		i = (i + 1) & mask
	}
	r.index[i] = uint32(pos + 1)
}

// remove takes ring position pos out of the index, moving back the slots
// after it that would otherwise no longer be reached from their home
// (deletion without tombstones, so probes stay as short as the load).
func (r *recentSpans) remove(pos int) {
	mask := len(r.index) - 1
	i := r.home(&r.ring[pos])
	for r.index[i] != uint32(pos+1) {
		i = (i + 1) & mask
	}
	for j := (i + 1) & mask; r.index[j] != 0; j = (j + 1) & mask {
		// The entry at j may fill the hole at i unless its home lies
		// cyclically in (i, j]: then it would be probed for past i only.
		h := r.home(&r.ring[r.index[j]-1])
		if (j-h)&mask >= (j-i)&mask {
			r.index[i] = r.index[j]
			i = j
		}
	}
	r.index[i] = 0
}

// grow doubles the index and places every ring position again.
func (r *recentSpans) grow() {
	r.index = make([]uint32, 2*len(r.index))
	for pos := range r.ring {
		r.place(pos, r.home(&r.ring[pos]))
	}
}
