// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cumulative // import "github.com/gpubuild/otelcol-gpubuild/internal/cumulative"

import (
	"slices"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// snapshot is one cumulative point.
type snapshot struct {
	start, ts pcommon.Timestamp

	// A histogram's or summary's count and sum. A sum's value is kept in
	// the same two words (read it with intValue or value): its int64 bits
	// in count when isInt, else in sum. A series is one kind for life, so
	// the words never mean both, and every record is 16 bytes smaller.
	count uint64
	sum   float64
	isInt bool

	// *histogramPart is nil for sums and summaries, so that their records
	// stay small; its fields read as the snapshot's own.
	*histogramPart
}

// intValue is a sum's value when isInt.
func (s *snapshot) intValue() int64 { return int64(s.count) }

// value is a sum's value when not isInt.
func (s *snapshot) value() float64 { return s.sum }

// setIntValue makes s a sum point of integer value v.
func (s *snapshot) setIntValue(v int64) { s.isInt, s.count, s.sum = true, uint64(v), 0 }

// setValue makes s a sum point of floating-point value v.
func (s *snapshot) setValue(v float64) { s.isInt, s.count, s.sum = false, 0, v }

// histogramPart is what only histograms and exponential histograms keep.
// It is made with room for its bucket counts within it (newHistogramPart),
// so that most series' histogram points are one object each.
type histogramPart struct {
	min, max float64
	bounds   []float64 // explicit bounds
	counts   []uint64  // explicit bucket counts, or positive exponential buckets
	// *exponentialPart is nil for explicit histograms; its fields read as
	// the part's own.
	*exponentialPart
	hasMin, hasMax bool
}

// exponentialPart is what only exponential histograms keep.
type exponentialPart struct {
	zeroCount            uint64
	neg                  []uint64 // negative buckets
	scale                int32
	posOffset, negOffset int32
}

// The sizes of room for bucket counts a histogram part is made with: the
// SDKs' default explicit bounds give 16 buckets. Each is one size class of
// the Go allocator (144 and 208 bytes), where a part and its counts apart
// were two objects (112 bytes and the counts').
type (
	histogramPartRoom8 struct {
		histogramPart
		room [8]uint64
	}
	histogramPartRoom16 struct {
		histogramPart
		room [16]uint64
	}
)

// newHistogramPart is an empty part with room for n bucket counts.
func newHistogramPart(n int) *histogramPart {
	switch {
	case n <= len(histogramPartRoom8{}.room):
		h := new(histogramPartRoom8)
		h.counts = h.room[:0]
		return &h.histogramPart
	case n <= len(histogramPartRoom16{}.room):
		h := new(histogramPartRoom16)
		h.counts = h.room[:0]
		return &h.histogramPart
	}
	return &histogramPart{counts: make([]uint64, 0, n)}
}

// seriesKind says how two points of a series compare.
type seriesKind uint8

const (
	sumSeries seriesKind = iota
	histogramSeries
	exponentialSeries
	summarySeries
)

// fell reports whether p is below prev: a reset.
func (k seriesKind) fell(p, prev *snapshot) bool {
	switch k {
	case sumSeries:
		return sumFell(p, prev)
	case exponentialSeries:
		return exponentialFell(p, prev)
	default:
		return histogramFell(p, prev)
	}
}

// layoutChanged reports whether p and prev cannot be subtracted.
func (k seriesKind) layoutChanged(p, prev *snapshot) bool {
	return k == histogramSeries && explicitLayoutChanged(p, prev)
}

// setDeltaMinMax sets the min and max of a delta converted from cumulative
// points. The cumulative min/max cover the series' whole life; they are the
// interval's only when they changed in it (a new lowest or highest value was
// observed), otherwise the interval's min/max are unknown and left out.
func setDeltaMinMax(p, prev *snapshot, setMin func(float64), removeMin func(), setMax func(float64), removeMax func()) {
	if p.hasMin && prev.hasMin && p.min < prev.min {
		setMin(p.min)
	} else {
		removeMin()
	}
	if p.hasMax && prev.hasMax && p.max > prev.max {
		setMax(p.max)
	} else {
		removeMax()
	}
}

// reuse empties s, keeping old's histogram buffers for the next copyFrom.
func (s *snapshot) reuse(old *snapshot) {
	*s = snapshot{histogramPart: old.histogramPart}
}

// copyFrom makes s a copy of p, reusing s's buffers; the explicit bounds
// come from shared (never written to, so kept as they are when equal).
func (s *snapshot) copyFrom(p *snapshot, shared *layouts) {
	h := s.histogramPart
	*s = *p
	if p.histogramPart == nil {
		s.histogramPart = nil
		return
	}
	if h == nil || cap(h.counts) < len(p.counts) {
		h = newHistogramPart(len(p.counts))
	}
	bounds, counts, e := h.bounds, h.counts, h.exponentialPart
	*h = *p.histogramPart
	h.bounds = bounds
	if !slices.Equal(bounds, p.bounds) {
		h.bounds = shared.shared(p.bounds)
	}
	h.counts = append(counts[:0], p.counts...)
	h.exponentialPart = nil
	if p.exponentialPart != nil {
		if e == nil {
			e = new(exponentialPart)
		}
		neg := e.neg
		*e = *p.exponentialPart
		e.neg = append(neg[:0], p.neg...)
		h.exponentialPart = e
	}
	s.histogramPart = h
}

func sumFell(p, prev *snapshot) bool {
	if p.isInt != prev.isInt {
		return true
	}
	if p.isInt {
		return p.intValue() < prev.intValue()
	}
	return p.value() < prev.value()
}

func histogramFell(p, prev *snapshot) bool {
	if p.count < prev.count {
		return true
	}
	if p.histogramPart == nil || prev.histogramPart == nil {
		return false // summaries and counts: the count alone
	}
	for i := range min(len(p.counts), len(prev.counts)) {
		if p.counts[i] < prev.counts[i] {
			return true
		}
	}
	return false
}

func explicitLayoutChanged(p, prev *snapshot) bool {
	return !slices.Equal(p.bounds, prev.bounds) || len(p.counts) != len(prev.counts)
}

// exponentialFell reports whether any bucket of p (at the coarser of the two
// scales) holds fewer observations than the same bucket of prev.
func exponentialFell(p, prev *snapshot) bool {
	if p.count < prev.count || p.zeroCount < prev.zeroCount {
		return true
	}
	scale := min(p.scale, prev.scale)
	return bucketsFell(p.posOffset, p.counts, p.scale, prev.posOffset, prev.counts, prev.scale, scale) ||
		bucketsFell(p.negOffset, p.neg, p.scale, prev.negOffset, prev.neg, prev.scale, scale)
}

func bucketsFell(off int32, counts []uint64, scale int32, prevOff int32, prevCounts []uint64, prevScale int32, to int32) bool {
	o, c := downscale(off, counts, scale-to)
	po, pc := downscale(prevOff, prevCounts, prevScale-to)
	for i, v := range pc {
		j := int(po) + i - int(o)
		if v > 0 && (j < 0 || j >= len(c) || c[j] < v) {
			return true
		}
	}
	return false
}

// exponentialDelta is p minus prev at the coarser of their scales; p must
// not have fallen below prev.
func exponentialDelta(p, prev *snapshot) snapshot {
	scale := min(p.scale, prev.scale)
	d := snapshot{histogramPart: &histogramPart{exponentialPart: &exponentialPart{scale: scale, zeroCount: p.zeroCount - prev.zeroCount}}}
	d.posOffset, d.counts = subtractBuckets(p.posOffset, p.counts, p.scale, prev.posOffset, prev.counts, prev.scale, scale)
	d.negOffset, d.neg = subtractBuckets(p.negOffset, p.neg, p.scale, prev.negOffset, prev.neg, prev.scale, scale)
	return d
}

func subtractBuckets(off int32, counts []uint64, scale int32, prevOff int32, prevCounts []uint64, prevScale int32, to int32) (int32, []uint64) {
	o, c := downscale(off, counts, scale-to)
	c = slices.Clone(c)
	po, pc := downscale(prevOff, prevCounts, prevScale-to)
	for i, v := range pc {
		if j := int(po) + i - int(o); j >= 0 && j < len(c) {
			c[j] -= v
		}
	}
	return o, c
}

// downscale merges exponential buckets to a scale lower by by (each step
// halves the resolution: bucket i goes to i>>1). Indexes are computed in
// 64 bits: OTLP lets a point's offset plus its bucket count pass int32.
func downscale(offset int32, counts []uint64, by int32) (int32, []uint64) {
	if by <= 0 || len(counts) == 0 {
		return offset, counts
	}
	first := int64(offset) >> by
	last := (int64(offset) + int64(len(counts)) - 1) >> by
	out := make([]uint64, last-first+1)
	for i, v := range counts {
		out[((int64(offset)+int64(i))>>by)-first] += v
	}
	return int32(first), out
}
