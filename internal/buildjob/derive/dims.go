// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derive

import (
	"hash/maphash"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// dimValue is the value of one configured dimension. Strings, what
// dimensions hold in practice, are kept as Go strings so that copying them
// into state costs one allocation; other types keep their pdata value.
type dimValue struct {
	kind  dimKind
	str   string
	other pcommon.Value // only for dimOther
}

type dimKind uint8

const (
	dimUnset dimKind = iota
	dimString
	dimOther
)

// dimFrom borrows v: the result must not outlive the input batch unless
// owned() is called.
func dimFrom(v pcommon.Value) dimValue {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return dimValue{kind: dimString, str: v.Str()}
	case pcommon.ValueTypeEmpty:
		return dimValue{}
	}
	return dimValue{kind: dimOther, other: v}
}

// owned returns a copy that references nothing in the input batch.
func (d dimValue) owned() dimValue {
	switch d.kind {
	case dimString:
		return dimValue{kind: dimString, str: strings.Clone(d.str)}
	case dimOther:
		v := pcommon.NewValueEmpty()
		d.other.CopyTo(v)
		return dimValue{kind: dimOther, other: v}
	}
	return d
}

func (d dimValue) equal(o dimValue) bool {
	switch {
	case d.kind != o.kind:
		return false
	case d.kind == dimString:
		return d.str == o.str
	case d.kind == dimOther:
		return d.other.Equal(o.other)
	}
	return true
}

func (d dimValue) writeHash(h *maphash.Hash) {
	h.WriteByte(byte(d.kind))
	switch d.kind {
	case dimString:
		h.WriteString(d.str)
		h.WriteByte(0xff)
	case dimOther:
		writeValue(h, d.other)
	}
}

// putTo sets the attribute key to the value, unless it is unset.
func (d dimValue) putTo(attrs pcommon.Map, key string) {
	switch d.kind {
	case dimString:
		attrs.PutStr(key, d.str)
	case dimOther:
		d.other.CopyTo(attrs.PutEmpty(key))
	}
}

// ownedDims returns owned copies of dims.
func ownedDims(dims []dimValue) []dimValue {
	out := make([]dimValue, len(dims))
	for i, d := range dims {
		out[i] = d.owned()
	}
	return out
}

// maxSharedDims bounds the dimension tuples runs share: past it, a new
// tuple is its run's own copy, as every tuple was before sharing.
const maxSharedDims = 1024

// sharedDims gives the runs of the run memory one owned copy of each
// dimension tuple. Thousands of remembered runs nearly always have a
// handful of tuples (engine, data type); an owned copy each was about a
// fifth of a remembered run's heap. A slice it returns is never written to.
type sharedDims struct {
	seed   maphash.Seed
	byHash map[uint64][]dimValue
}

func newSharedDims() *sharedDims {
	return &sharedDims{seed: maphash.MakeSeed(), byHash: map[uint64][]dimValue{}}
}

// own returns an owned tuple equal to dims (which may be borrowed from the
// input batch), shared with the runs that have the same one.
func (s *sharedDims) own(dims []dimValue) []dimValue {
	var h maphash.Hash
	h.SetSeed(s.seed)
	for _, v := range dims {
		v.writeHash(&h)
	}
	key := h.Sum64()
	shared, taken := s.byHash[key]
	if taken && dimsEqual(shared, dims) {
		return shared
	}
	owned := ownedDims(dims)
	if !taken && len(s.byHash) < maxSharedDims {
		s.byHash[key] = owned
	}
	return owned
}

func dimsEqual(a, b []dimValue) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].equal(b[i]) {
			return false
		}
	}
	return true
}
