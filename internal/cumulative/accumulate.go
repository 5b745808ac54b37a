// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cumulative // import "github.com/gpubuild/otelcol-gpubuild/internal/cumulative"

import (
	"context"
	"slices"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"
)

// Accumulate rewrites every delta point in md (monotonic sums, histograms,
// exponential histograms) into the cumulative point of its series: the sum of
// every delta accepted so far, from the start time of the series' first
// point. It is Convert's inverse and shares its state table, records, Undo
// and Save: with a storage attached, a restarted collector goes on from each
// series' last total with its original start time, so a store that reads
// cumulative series sees neither a reset nor a repeat.
//
// Points that cannot be added are removed and counted in cv.Dropped: older
// than the series' last point (out_of_order; the same timestamp again is a
// duplicate, a delta a client sent twice), or stamped beyond FutureTolerance.
// A histogram whose bounds changed starts its series anew (a reset, with the
// point's own start time). Cumulative points pass as they are, but one
// older than its series' last is removed and counted the same way
// (passedSeries). Gauges, non-monotonic sums and summaries are left as they
// are.
func (c *Tracker) Accumulate(ctx context.Context, md pmetric.Metrics, now time.Time, cv *Result) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expire(now, cv)
	eachMetric(md, func(m pmetric.Metric, base uint64) { c.accumulateMetric(ctx, m, base, now, cv) })
}

func (c *Tracker) accumulateMetric(ctx context.Context, m pmetric.Metric, base uint64, now time.Time, cv *Result) {
	switch m.Type() {
	case pmetric.MetricTypeSum:
		sum := m.Sum()
		if sum.IsMonotonic() && sum.AggregationTemporality() == pmetric.AggregationTemporalityCumulative {
			sum.DataPoints().RemoveIf(func(dp pmetric.NumberDataPoint) bool {
				return !c.passInOrder(mix(base, hashMap(dp.Attributes())), dp.Timestamp(), now, m.Name(), cv)
			})
			return
		}
		if !sum.IsMonotonic() || sum.AggregationTemporality() != pmetric.AggregationTemporalityDelta {
			return
		}
		sum.DataPoints().RemoveIf(func(dp pmetric.NumberDataPoint) bool {
			if dp.Flags().NoRecordedValue() {
				return true
			}
			p := sumPoint(dp)
			s := c.addPoint(ctx, mix(base, hashMap(dp.Attributes())), &p, now, sumSeries, m.Name(), cv)
			if s == nil {
				return true
			}
			dp.SetStartTimestamp(s.cur.start)
			if s.cur.isInt {
				dp.SetIntValue(s.cur.intValue())
			} else {
				dp.SetDoubleValue(s.cur.value())
			}
			return false
		})
		sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)

	case pmetric.MetricTypeHistogram:
		h := m.Histogram()
		if h.AggregationTemporality() == pmetric.AggregationTemporalityCumulative {
			h.DataPoints().RemoveIf(func(dp pmetric.HistogramDataPoint) bool {
				return !c.passInOrder(mix(base, hashMap(dp.Attributes())), dp.Timestamp(), now, m.Name(), cv)
			})
			return
		}
		if h.AggregationTemporality() != pmetric.AggregationTemporalityDelta {
			return
		}
		h.DataPoints().RemoveIf(func(dp pmetric.HistogramDataPoint) bool {
			if dp.Flags().NoRecordedValue() {
				return true
			}
			p := c.explicitPoint(dp)
			s := c.addPoint(ctx, mix(base, hashMap(dp.Attributes())), &p, now, histogramSeries, m.Name(), cv)
			if s == nil {
				return true
			}
			cur := &s.cur
			dp.SetStartTimestamp(cur.start)
			dp.SetCount(cur.count)
			if dp.HasSum() {
				dp.SetSum(cur.sum)
			}
			dp.BucketCounts().FromRaw(cur.counts)
			setTotalMinMax(cur, dp.SetMin, dp.RemoveMin, dp.SetMax, dp.RemoveMax)
			return false
		})
		h.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)

	case pmetric.MetricTypeExponentialHistogram:
		h := m.ExponentialHistogram()
		if h.AggregationTemporality() == pmetric.AggregationTemporalityCumulative {
			h.DataPoints().RemoveIf(func(dp pmetric.ExponentialHistogramDataPoint) bool {
				return !c.passInOrder(mix(base, hashMap(dp.Attributes())), dp.Timestamp(), now, m.Name(), cv)
			})
			return
		}
		if h.AggregationTemporality() != pmetric.AggregationTemporalityDelta {
			return
		}
		h.DataPoints().RemoveIf(func(dp pmetric.ExponentialHistogramDataPoint) bool {
			if dp.Flags().NoRecordedValue() {
				return true
			}
			p := c.exponentialPoint(dp)
			s := c.addPoint(ctx, mix(base, hashMap(dp.Attributes())), &p, now, exponentialSeries, m.Name(), cv)
			if s == nil {
				return true
			}
			cur := &s.cur
			dp.SetStartTimestamp(cur.start)
			dp.SetCount(cur.count)
			if dp.HasSum() {
				dp.SetSum(cur.sum)
			}
			dp.SetScale(cur.scale)
			dp.SetZeroCount(cur.zeroCount)
			dp.Positive().SetOffset(cur.posOffset)
			dp.Positive().BucketCounts().FromRaw(cur.counts)
			dp.Negative().SetOffset(cur.negOffset)
			dp.Negative().BucketCounts().FromRaw(cur.neg)
			setTotalMinMax(cur, dp.SetMin, dp.RemoveMin, dp.SetMax, dp.RemoveMax)
			return false
		})
		h.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	}
}

// addPoint adds the delta p to its series and returns the series, whose cur
// is then the cumulative point to send; nil when p is dropped (counted).
func (c *Tracker) addPoint(ctx context.Context, key uint64, p *snapshot, now time.Time, kind seriesKind, metric string, cv *Result) *series {
	s := c.lookup(key)
	if s == nil && c.store != nil {
		s = c.restore(ctx, key, now, kind, cv)
	}
	if c.cfg.FutureTolerance > 0 && p.ts.AsTime().After(now.Add(c.cfg.FutureTolerance)) {
		c.dropped(cv, ReasonFuture, metric)
		return nil
	}
	if s != nil && !s.unknown {
		s.seen = now.UnixNano()
		c.touch(s)
		switch {
		case p.ts == s.cur.ts:
			c.dropped(cv, ReasonDuplicate, metric)
			return nil
		case p.ts < s.cur.ts:
			c.dropped(cv, ReasonOutOfOrder, metric)
			return nil
		case !kind.layoutChanged(p, &s.cur):
			// The new total in prev's old buffers; the old one stays as
			// prev for Undo.
			s.prev, s.cur = s.cur, s.prev
			s.cur.copyFrom(&s.prev, &c.layouts)
			addDelta(&s.cur, p, kind)
			s.cur.ts = p.ts
			s.hasPrev = true
			cv.record(key, p.ts, emitAsIs, true)
			return s
		}
		// Other bounds: the series starts anew from p (a reset).
	}
	if s == nil {
		s = c.insert(key, now, kind, cv)
	} else {
		// Unreadable saved state, or a histogram whose bounds changed.
		s.kind, s.unknown, s.seen = kind, false, now.UnixNano()
		c.touch(s)
	}
	s.cur.copyFrom(p, &c.layouts)
	if s.cur.start == 0 || s.cur.start > s.cur.ts {
		s.cur.start = s.cur.ts
	}
	s.hasPrev = false
	cv.record(key, p.ts, emitAsIs, true)
	return s
}

// addDelta adds the delta p to the cumulative point t (same kind, and for
// explicit histograms the same bounds).
func addDelta(t, p *snapshot, kind seriesKind) {
	switch kind {
	case sumSeries:
		switch {
		case t.isInt && p.isInt:
			t.setIntValue(t.intValue() + p.intValue())
		case t.isInt:
			t.setValue(float64(t.intValue()) + p.value())
		case p.isInt:
			t.setValue(t.value() + float64(p.intValue()))
		default:
			t.setValue(t.value() + p.value())
		}
		return
	case histogramSeries:
		for i := range min(len(t.counts), len(p.counts)) {
			t.counts[i] += p.counts[i]
		}
	case exponentialSeries:
		scale := min(t.scale, p.scale)
		t.posOffset, t.counts = addBuckets(t.posOffset, t.counts, t.scale, p.posOffset, p.counts, p.scale, scale)
		t.negOffset, t.neg = addBuckets(t.negOffset, t.neg, t.scale, p.negOffset, p.neg, p.scale, scale)
		t.scale = scale
		t.zeroCount += p.zeroCount
	}
	t.count += p.count
	t.sum += p.sum
	// The total's min and max are known only while every delta had them.
	t.hasMin = t.hasMin && p.hasMin
	t.hasMax = t.hasMax && p.hasMax
	if t.hasMin {
		t.min = min(t.min, p.min)
	}
	if t.hasMax {
		t.max = max(t.max, p.max)
	}
}

// addBuckets adds two exponential bucket ranges at scale to (not above
// either's own scale), in a new slice covering both.
func addBuckets(off int32, counts []uint64, scale int32, pOff int32, pCounts []uint64, pScale int32, to int32) (int32, []uint64) {
	o, c := downscale(off, counts, scale-to)
	po, pc := downscale(pOff, pCounts, pScale-to)
	switch {
	case len(pc) == 0:
		return o, slices.Clone(c)
	case len(c) == 0:
		return po, slices.Clone(pc)
	}
	first := min(int64(o), int64(po))
	last := max(int64(o)+int64(len(c)), int64(po)+int64(len(pc)))
	out := make([]uint64, last-first)
	for i, v := range c {
		out[int64(o)+int64(i)-first] += v
	}
	for i, v := range pc {
		out[int64(po)+int64(i)-first] += v
	}
	return int32(first), out
}

// setTotalMinMax sets the min and max of a cumulative point built from
// deltas, or removes them when some delta had none.
func setTotalMinMax(t *snapshot, setMin func(float64), removeMin func(), setMax func(float64), removeMax func()) {
	if t.hasMin {
		setMin(t.min)
	} else {
		removeMin()
	}
	if t.hasMax {
		setMax(t.max)
	} else {
		removeMax()
	}
}
