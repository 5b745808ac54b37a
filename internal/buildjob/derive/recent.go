package derive

import (
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
type recentSpans struct {
	capacity int
	ring     []spanIdentity
	next     int
	seen     map[spanIdentity]struct{}
}

func newRecentSpans(capacity int) *recentSpans {
	return &recentSpans{capacity: capacity, seen: map[spanIdentity]struct{}{}}
}

// add records id and reports whether it was new.
func (r *recentSpans) add(id spanIdentity) bool {
	if _, ok := r.seen[id]; ok {
		return false
	}
	if len(r.ring) < r.capacity {
		r.ring = append(r.ring, id)
	} else {
		delete(r.seen, r.ring[r.next])
		r.ring[r.next] = id
		r.next = (r.next + 1) % r.capacity
	}
	r.seen[id] = struct{}{}
	return true
}
