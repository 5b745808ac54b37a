// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package translate // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/translate"

import (
	"cmp"
	"math"
	"slices"

	"go.opentelemetry.io/collector/pdata/pmetric"
)

// A histogram becomes CloudWatch Values/Counts: one representative value per
// non-empty bucket, with its count. CloudWatch computes percentiles from them
// and SampleCount, Sum, Minimum and Maximum as count, sum of value*count,
// smallest and largest value. To make those four equal to the histogram's
// count, sum, min and max:
//   - min and max are sent as values of their own with count 1 (taken out of
//     the first and last non-empty bucket), and every bucket is clamped to
//     [min, max], so no representative lies outside them;
//   - each representative starts at its bucket's midpoint and all are then
//     moved by the same fraction of their room towards the upper (or lower)
//     bucket bounds until the weighted sum equals the histogram's sum. A
//     representative never leaves its bucket, so percentiles stay as close
//     as the buckets allow.

// bucket is one non-empty histogram bucket; lo or hi may be infinite.
type bucket struct {
	lo, hi, count float64
}

// histogramSummary is what a histogram point says about all its observations.
type histogramSummary struct {
	count          float64
	sum            float64
	min, max       float64
	hasSum         bool
	hasMin, hasMax bool
}

// representatives appends to values and counts the ascending, distinct values
// and their counts that describe the buckets and summary as above. buckets
// must be non-empty, ascending and hold summary.count observations in all;
// they are modified. reps is scratch space, returned for reuse.
func representatives(buckets []bucket, s histogramSummary, values, counts, reps []float64) ([]float64, []float64, []float64) {
	if s.count <= 0 || len(buckets) == 0 {
		return values, counts, reps
	}
	// Clamp the buckets to [min, max]; no observation lies outside.
	for i := range buckets {
		b := &buckets[i]
		if s.hasMin {
			b.lo, b.hi = math.Max(b.lo, s.min), math.Max(b.hi, s.min)
		}
		if s.hasMax {
			b.lo, b.hi = math.Min(b.lo, s.max), math.Min(b.hi, s.max)
		}
	}
	// Take min and max out as observations of their own.
	remainingSum := s.sum
	first, last := 0, len(buckets)-1
	leadMin, tailMax := false, false
	if s.hasMin {
		leadMin = true
		remainingSum -= s.min
		if buckets[first].count--; buckets[first].count <= 0 {
			first++
		}
	}
	if s.hasMax && first <= last {
		tailMax = true
		remainingSum -= s.max
		if buckets[last].count--; buckets[last].count <= 0 {
			last--
		}
	}
	var inner []bucket
	if first <= last {
		inner = buckets[first : last+1]
	}

	reps = reps[:0]
	for _, b := range inner {
		reps = append(reps, startingPoint(b, remainingSum, s.count))
	}
	if s.hasSum && len(inner) > 0 {
		fitSum(inner, reps, remainingSum)
	}

	start := len(values)
	appendMerged := func(v, c float64) {
		if math.Abs(v) < minMagnitude {
			v = 0 // CloudWatch rejects non-zero values this close to zero
		}
		if n := len(values); n > start && values[n-1] == v {
			counts[n-1] += c
			return
		}
		values = append(values, v)
		counts = append(counts, c)
	}
	if leadMin {
		appendMerged(s.min, 1)
	}
	for i, b := range inner {
		appendMerged(reps[i], b.count)
	}
	if tailMax {
		appendMerged(s.max, 1)
	}
	n := inOrder(values[start:], counts[start:])
	return values[:start+n], counts[:start+n], reps
}

// inOrder makes values ascending and distinct, adding up the counts of
// equal ones, and returns how many are left. The buckets of a consistent
// point give ascending values already; those of an inconsistent one can
// overlap (an exponential histogram whose zero threshold passes its first
// buckets), and CloudWatch rejects a request in which a value repeats.
// Putting values in order and merging equal ones leaves every statistic
// as it was.
func inOrder(values, counts []float64) int {
	ordered := true
	for i := 1; i < len(values); i++ {
		ordered = ordered && values[i-1] < values[i]
	}
	if ordered {
		return len(values)
	}
	type valueCount struct{ v, c float64 }
	vc := make([]valueCount, len(values))
	for i := range values {
		vc[i] = valueCount{values[i], counts[i]}
	}
	slices.SortStableFunc(vc, func(a, b valueCount) int { return cmp.Compare(a.v, b.v) })
	n := 0
	for _, x := range vc {
		if n > 0 && values[n-1] == x.v {
			counts[n-1] += x.c
			continue
		}
		values[n], counts[n] = x.v, x.c
		n++
	}
	return n
}

// startingPoint is the bucket's midpoint, or its finite bound when the other
// is infinite, or the mean when both are.
func startingPoint(b bucket, sum, count float64) float64 {
	loInf, hiInf := math.IsInf(b.lo, 0), math.IsInf(b.hi, 0)
	switch {
	case loInf && hiInf:
		if count > 0 && !math.IsNaN(sum) {
			return sum / count
		}
		return 0
	case loInf:
		return b.hi
	case hiInf:
		return b.lo
	default:
		return b.lo + (b.hi-b.lo)/2
	}
}

// fitSum moves the representatives inside their buckets so that
// sum(reps[i]*count[i]) equals target, when the buckets allow it.
func fitSum(buckets []bucket, reps []float64, target float64) {
	for pass := 0; pass < 2; pass++ { // the second pass removes rounding error
		diff := target - weightedSum(buckets, reps)
		if diff == 0 || math.IsNaN(diff) || math.IsInf(diff, 0) {
			return
		}
		// An unbounded bucket can absorb any difference on its open side.
		if i := unboundedToward(buckets, diff > 0); i >= 0 {
			reps[i] += diff / buckets[i].count
			continue
		}
		room := 0.0
		for i, b := range buckets {
			room += b.count * (bound(b, diff > 0) - reps[i])
		}
		if room == 0 {
			return
		}
		f := math.Min(diff/room, 1)
		for i, b := range buckets {
			edge := bound(b, diff > 0)
			reps[i] += f * (edge - reps[i])
			if (diff > 0 && reps[i] > edge) || (diff < 0 && reps[i] < edge) {
				reps[i] = edge
			}
		}
	}
}

func bound(b bucket, up bool) float64 {
	if up {
		return b.hi
	}
	return b.lo
}

// unboundedToward returns the last bucket open upwards (up) or the first open
// downwards, or -1.
func unboundedToward(buckets []bucket, up bool) int {
	if up {
		for i := len(buckets) - 1; i >= 0; i-- {
			if math.IsInf(buckets[i].hi, 1) {
				return i
			}
		}
		return -1
	}
	for i := range buckets {
		if math.IsInf(buckets[i].lo, -1) {
			return i
		}
	}
	return -1
}

func weightedSum(buckets []bucket, reps []float64) float64 {
	s := 0.0
	for i, b := range buckets {
		s += b.count * reps[i]
	}
	return s
}

// explicitBuckets appends the non-empty buckets of an explicit-bucket
// histogram point, scaled by scale. It fails with reasonInvalid when the
// bucket counts do not fit the bounds, with reasonInconsistentHistogram when
// they do not add up to the point's count.
func explicitBuckets(dst []bucket, dp pmetric.HistogramDataPoint, scale float64) ([]bucket, DropReason, bool) {
	counts, bounds := dp.BucketCounts(), dp.ExplicitBounds()
	if counts.Len() != bounds.Len()+1 {
		return dst, reasonInvalid, false
	}
	var total uint64
	lo := math.Inf(-1)
	for i := 0; i < counts.Len(); i++ {
		hi := math.Inf(1)
		if i < bounds.Len() {
			hi = bounds.At(i) * scale
		}
		if math.IsNaN(hi) || hi < lo {
			return dst, reasonInvalid, false
		}
		if c := counts.At(i); c > 0 {
			dst = append(dst, bucket{lo: lo, hi: hi, count: float64(c)})
			total += c
		}
		lo = hi
	}
	return dst, reasonInconsistentHistogram, total == dp.Count()
}

// exponentialBuckets appends the non-empty buckets of an exponential
// histogram point in ascending order: negative buckets, the zero bucket,
// positive buckets. A non-empty bucket wholly beyond float64 (both bounds
// overflow, at a low scale or a far index) holds observations beyond
// CloudWatch's range: the point fails with reasonOutOfRange, as one whose
// values pass 2^360 does (a bucket of two infinite bounds has no value of
// its own, and would otherwise repeat or disorder the point's values,
// which CloudWatch rejects with the whole request).
func exponentialBuckets(dst []bucket, dp pmetric.ExponentialHistogramDataPoint, scale float64) ([]bucket, DropReason, bool) {
	// Bucket index i covers (base^i, base^(i+1)] with base = 2^(2^-scale).
	step := math.Ldexp(1, -int(dp.Scale()))
	boundary := func(index int64) float64 { return math.Exp2(float64(index)*step) * scale }
	var total uint64

	neg := dp.Negative()
	negCounts := neg.BucketCounts()
	for k := negCounts.Len() - 1; k >= 0; k-- {
		if c := negCounts.At(k); c > 0 {
			idx := int64(neg.Offset()) + int64(k)
			b := bucket{lo: -boundary(idx + 1), hi: -boundary(idx), count: float64(c)}
			if math.IsInf(b.hi, 0) {
				return dst, reasonOutOfRange, false
			}
			dst = append(dst, b)
			total += c
		}
	}
	if zc := dp.ZeroCount(); zc > 0 {
		zt := math.Abs(dp.ZeroThreshold()) * scale
		dst = append(dst, bucket{lo: -zt, hi: zt, count: float64(zc)})
		total += zc
	}
	pos := dp.Positive()
	posCounts := pos.BucketCounts()
	for k := 0; k < posCounts.Len(); k++ {
		if c := posCounts.At(k); c > 0 {
			idx := int64(pos.Offset()) + int64(k)
			b := bucket{lo: boundary(idx), hi: boundary(idx + 1), count: float64(c)}
			if math.IsInf(b.lo, 0) {
				return dst, reasonOutOfRange, false
			}
			dst = append(dst, b)
			total += c
		}
	}
	return dst, reasonInconsistentHistogram, total == dp.Count()
}
