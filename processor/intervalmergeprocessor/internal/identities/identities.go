// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package identities remembers which sidecar requests a gateway merged, so
// that a request sent again (a retry after a timeout, a reset, a restart of
// either side) is dropped instead of counted twice.
//
// Per sidecar instance it keeps the sequence numbers seen as sorted ranges:
// a sidecar's requests arrive nearly in order, so its set is one range, plus
// one more per request still in flight out of order or sent to another
// gateway. An instance not heard from for the TTL is forgotten (a sidecar
// restarts with a new instance id, so a dead one never comes back except
// through a retry older than the TTL).
package identities // import "github.com/gpubuild/otelcol-gpubuild/processor/intervalmergeprocessor/internal/identities"

import (
	"encoding/binary"
	"errors"
	"slices"
	"sort"
	"time"

	"github.com/gpubuild/otelcol-gpubuild/internal/requestid"
	"github.com/gpubuild/otelcol-gpubuild/internal/state/record"
)

// MaxRanges bounds the ranges kept per instance: past it the lowest gap is
// closed (its sequences count as seen). Gaps come from requests sent to
// another gateway or refused before sending; thousands of them in one
// instance's TTL mean something else is wrong.
const MaxRanges = 4096

type span struct{ lo, hi uint64 }

type instance struct {
	spans []span // sorted, disjoint, not adjacent
	last  int64  // unix seconds of the last request
}

// Set is the identities seen. Not safe for concurrent use.
type Set struct {
	ttl       time.Duration
	instances map[string]*instance
}

// New returns an empty set whose instances live ttl after their last request.
func New(ttl time.Duration) *Set {
	return &Set{ttl: ttl, instances: map[string]*instance{}}
}

// Len is the number of instances remembered.
func (s *Set) Len() int { return len(s.instances) }

// Seen tells whether id was added.
func (s *Set) Seen(id requestid.ID) bool {
	in := s.instances[id.Instance]
	if in == nil {
		return false
	}
	i := sort.Search(len(in.spans), func(i int) bool { return in.spans[i].hi >= id.Sequence })
	return i < len(in.spans) && in.spans[i].lo <= id.Sequence
}

// Add records id as seen at now. It reports whether a gap had to be closed
// to stay within MaxRanges.
func (s *Set) Add(id requestid.ID, now time.Time) (closedGap bool) {
	in := s.instances[id.Instance]
	if in == nil {
		in = &instance{}
		s.instances[id.Instance] = in
	}
	in.last = max(in.last, now.Unix())
	q := id.Sequence
	// i: the first span that starts after q.
	i := sort.Search(len(in.spans), func(i int) bool { return in.spans[i].lo > q })
	switch {
	case i > 0 && in.spans[i-1].hi >= q:
		return false // already seen
	case i > 0 && in.spans[i-1].hi+1 == q:
		in.spans[i-1].hi = q
		if i < len(in.spans) && in.spans[i].lo == q+1 {
			in.spans[i-1].hi = in.spans[i].hi
			in.spans = slices.Delete(in.spans, i, i+1)
		}
	case i < len(in.spans) && in.spans[i].lo == q+1:
		in.spans[i].lo = q
	default:
		in.spans = slices.Insert(in.spans, i, span{q, q})
	}
	if len(in.spans) > MaxRanges {
		in.spans[1].lo = in.spans[0].lo
		in.spans = in.spans[1:]
		return true
	}
	return false
}

// Expire forgets the instances whose last request is older than the TTL
// and returns how many.
func (s *Set) Expire(now time.Time) int {
	cutoff := now.Add(-s.ttl).Unix()
	n := 0
	for k, in := range s.instances {
		if in.last < cutoff {
			delete(s.instances, k)
			n++
		}
	}
	return n
}

// Snapshot format: "gpid", version (uint32 LE), the body, CRC-32C of the
// body (uint32 LE). Body: the instance count (uvarint), then per instance
// its id (uvarint length and bytes), its last request (varint unix
// seconds), its span count (uvarint) and each span as the distance from the
// previous span's end and its length (uvarints).
const (
	magic   = "gpid"
	version = 1
)

// ErrDamaged is the error of a snapshot that is cut short or fails its checksum.
var ErrDamaged = errors.New("identities snapshot damaged")

// ErrUnknownFormat is the error of a snapshot written by a later version.
var ErrUnknownFormat = errors.New("identities snapshot written in an unknown format")

// AppendSnapshot appends the set's snapshot to b.
func (s *Set) AppendSnapshot(b []byte) []byte {
	b = record.AppendHeader(b, magic, version)
	start := len(b)
	keys := make([]string, 0, len(s.instances))
	for k := range s.instances {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		in := s.instances[k]
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		b = binary.AppendVarint(b, in.last)
		b = binary.AppendUvarint(b, uint64(len(in.spans)))
		var prev uint64
		for _, sp := range in.spans {
			b = binary.AppendUvarint(b, sp.lo-prev)
			b = binary.AppendUvarint(b, sp.hi-sp.lo)
			prev = sp.hi
		}
	}
	return record.SealSnapshot(b, start)
}

// Load replaces the set's content with the snapshot b.
func (s *Set) Load(b []byte) error {
	body, err := record.OpenSnapshot(b, magic, version)
	switch {
	case errors.Is(err, record.ErrUnknownVersion):
		return ErrUnknownFormat
	case err != nil:
		return ErrDamaged
	}
	r := reader{b: body}
	n := r.uvarint()
	instances := make(map[string]*instance, min(n, 1<<16))
	for i := uint64(0); i < n && r.ok(); i++ {
		k := string(r.bytes())
		in := &instance{last: r.varint()}
		spans := r.uvarint()
		var prev uint64
		for j := uint64(0); j < spans && r.ok(); j++ {
			lo := prev + r.uvarint()
			hi := lo + r.uvarint()
			if lo == 0 || (j > 0 && lo <= prev+1) || hi < lo {
				return ErrDamaged
			}
			in.spans = append(in.spans, span{lo, hi})
			prev = hi
		}
		instances[k] = in
	}
	if !r.ok() || len(r.b) != 0 {
		return ErrDamaged
	}
	s.instances = instances
	return nil
}

type reader struct {
	b   []byte
	bad bool
}

func (r *reader) ok() bool { return !r.bad }

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) bytes() []byte {
	n := r.uvarint()
	if r.bad || n > uint64(len(r.b)) {
		r.bad = true
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}
