// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cumulative // import "github.com/gpubuild/otelcol-gpubuild/internal/cumulative"

import (
	"encoding/binary"
	"math"
	"slices"

	"github.com/cespare/xxhash/v2"
)

// maxLayouts bounds the shared bounds: past it, a new layout is kept by its
// series alone, as every layout was before sharing.
const maxLayouts = 256

// layouts shares the explicit bounds of histogram series. The series of one
// histogram metric nearly always have the same bounds (an SDK's defaults or
// the view's), which a series would otherwise keep twice (last point and
// the one before): 256 of the 973 heap bytes of a tracked histogram series
// with the SDKs' default bounds (BenchmarkStateMemory/histogram).
//
// A slice it returns is never written to, by it or by a snapshot.
type layouts struct {
	byHash map[uint64][]float64
}

// shared returns bounds equal to b that the caller may keep but must not
// modify; never b itself, which may be scratch space.
func (l *layouts) shared(b []float64) []float64 {
	if len(b) == 0 {
		return nil
	}
	h := hashBounds(b)
	if s, ok := l.byHash[h]; ok {
		if slices.Equal(s, b) {
			return s
		}
		return slices.Clone(b) // a collision: not shared
	}
	s := slices.Clone(b)
	if len(l.byHash) < maxLayouts {
		if l.byHash == nil {
			l.byHash = make(map[uint64][]float64)
		}
		l.byHash[h] = s
	}
	return s
}

// id returns the hash of b when b is a layout of the table itself (what
// shared returned for it), by which a saved entry may refer to it.
func (l *layouts) id(b []float64) (uint64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	h := hashBounds(b)
	s, ok := l.byHash[h]
	return h, ok && len(s) == len(b) && &s[0] == &b[0]
}

// hashBounds is stable across processes: saved entries refer to a layout by it.
func hashBounds(b []float64) uint64 {
	var d xxhash.Digest
	d.Reset()
	var buf [8]byte
	for _, f := range b {
		binary.LittleEndian.PutUint64(buf[:], math.Float64bits(f))
		_, _ = d.Write(buf[:])
	}
	return d.Sum64()
}
