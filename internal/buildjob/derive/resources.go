// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derive

import (
	"encoding/binary"
	"hash/maphash"
	"math"

	"github.com/gpubuild/otelcol-gpubuild/internal/buildjob/derivestate"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// resourceEntry is one distinct resource (one service instance) seen in the
// input. Derived metrics carry a copy of its attributes, so the metrics of
// two services are never summed together.
type resourceEntry struct {
	id          uint64 // unique per table, orders the output deterministically
	hash        uint64
	attrs       pcommon.Map // owned copy
	serviceName string
	// dimValues holds, per configured dimension, the resource's value: the
	// fallback when a span or record lacks the attribute.
	dimValues []dimValue
	// lastUsed is the flush epoch in which the entry was last interned.
	lastUsed uint64
	// stateRef: its persisted entry, once computed.
	stateRef derivestate.ResourceRef
}

// resourceTable interns resources so that each distinct resource has one
// entry, looked up by a hash of its attributes without allocating.
type resourceTable struct {
	seed       maphash.Seed
	dimensions []string
	byHash     map[uint64]*resourceEntry
	nextID     uint64
	epoch      uint64
}

func newResourceTable(seed maphash.Seed, dimensions []string) *resourceTable {
	return &resourceTable{seed: seed, dimensions: dimensions, byHash: map[uint64]*resourceEntry{}}
}

// intern returns the entry for res, creating it on first sight.
func (t *resourceTable) intern(res pcommon.Resource) *resourceEntry {
	attrs := res.Attributes()
	h := hashMap(t.seed, attrs)
	for {
		e, ok := t.byHash[h]
		if !ok {
			break
		}
		if e.attrs.Equal(attrs) {
			e.lastUsed = t.epoch
			return e
		}
		h++ // a 64-bit collision: probe the next slot
	}
	e := &resourceEntry{id: t.nextID, hash: h, attrs: pcommon.NewMap(), lastUsed: t.epoch}
	t.nextID++
	attrs.CopyTo(e.attrs)
	if v, ok := e.attrs.Get(attrServiceName); ok {
		e.serviceName = v.AsString()
	}
	// Borrowed from e.attrs, which the entry owns.
	e.dimValues = make([]dimValue, len(t.dimensions))
	for i, k := range t.dimensions {
		if v, ok := e.attrs.Get(k); ok {
			e.dimValues[i] = dimFrom(v)
		}
	}
	t.byHash[h] = e
	return e
}

// reintern returns the table's entry equal to e, putting e back when it was
// forgotten meanwhile. Job runs hold their entry for up to job_timeout; this
// keeps one output resource per distinct resource when such a run is counted.
func (t *resourceTable) reintern(e *resourceEntry) *resourceEntry {
	h := e.hash
	for {
		cur, ok := t.byHash[h]
		if !ok {
			break
		}
		if cur == e || cur.attrs.Equal(e.attrs) {
			cur.lastUsed = t.epoch
			return cur
		}
		h++
	}
	e.hash = h
	e.lastUsed = t.epoch
	t.byHash[h] = e
	return e
}

// forgetUnused drops entries not interned during the last keepEpochs flushes
// and starts a new epoch. Entries still referenced elsewhere stay valid.
func (t *resourceTable) forgetUnused(keepEpochs uint64) {
	for h, e := range t.byHash {
		if t.epoch-e.lastUsed >= keepEpochs {
			delete(t.byHash, h)
		}
	}
	t.epoch++
}

// hashMap hashes a map independently of attribute order (pcommon.Map keeps
// insertion order, which differs between SDKs for the same resource).
func hashMap(seed maphash.Seed, m pcommon.Map) uint64 {
	var sum uint64
	var h maphash.Hash
	h.SetSeed(seed)
	for k, v := range m.All() {
		h.Reset()
		h.WriteString(k)
		h.WriteByte(0)
		writeValue(&h, v)
		sum += h.Sum64()
	}
	return sum
}

// writeValue feeds a value into h. Strings, numbers and booleans, the types
// dimensions have in practice, are written without allocating.
func writeValue(h *maphash.Hash, v pcommon.Value) {
	var buf [8]byte
	h.WriteByte(byte(v.Type()))
	switch v.Type() {
	case pcommon.ValueTypeStr:
		h.WriteString(v.Str())
	case pcommon.ValueTypeInt:
		binary.LittleEndian.PutUint64(buf[:], uint64(v.Int()))
		_, _ = h.Write(buf[:])
	case pcommon.ValueTypeDouble:
		binary.LittleEndian.PutUint64(buf[:], math.Float64bits(v.Double()))
		_, _ = h.Write(buf[:])
	case pcommon.ValueTypeBool:
		if v.Bool() {
			h.WriteByte(1)
		} else {
			h.WriteByte(0)
		}
	case pcommon.ValueTypeEmpty:
	default:
		h.WriteString(v.AsString())
	}
	h.WriteByte(0xff)
}
