// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cumulative // import "github.com/gpubuild/otelcol-gpubuild/internal/cumulative"

import (
	"context"
	"math"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// Convert rewrites every cumulative point in md into a delta, removes the
// points that cannot be converted and counts them in cv.Dropped. It appends
// to cv.Records the points that moved their series on, for undo and save.
// ctx bounds the reads of saved state.
func (c *Tracker) Convert(ctx context.Context, md pmetric.Metrics, now time.Time, cv *Result) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expire(now, cv)
	eachMetric(md, func(m pmetric.Metric, base uint64) { c.convertMetric(ctx, m, base, now, cv) })
}

// eachMetric calls f with every metric of md and its metricHash.
func eachMetric(md pmetric.Metrics, f func(m pmetric.Metric, base uint64)) {
	rms := md.ResourceMetrics()
	for ri := 0; ri < rms.Len(); ri++ {
		rm := rms.At(ri)
		resHash := hashMap(rm.Resource().Attributes())
		sms := rm.ScopeMetrics()
		for si := 0; si < sms.Len(); si++ {
			sm := sms.At(si)
			scopeHash := hashStrings(sm.Scope().Name(), sm.Scope().Version())
			ms := sm.Metrics()
			for mi := 0; mi < ms.Len(); mi++ {
				m := ms.At(mi)
				f(m, metricHash(resHash, scopeHash, m))
			}
		}
	}
}

// explicitPoint is dp as a snapshot, its histogram part in the tracker's
// scratch space.
func (c *Tracker) explicitPoint(dp pmetric.HistogramDataPoint) snapshot {
	h := &c.scratch
	*h = histogramPart{
		min: dp.Min(), hasMin: dp.HasMin(), max: dp.Max(), hasMax: dp.HasMax(),
		bounds: appendFloats(h.bounds[:0], dp.ExplicitBounds()),
		counts: appendCounts(h.counts[:0], dp.BucketCounts()),
	}
	return snapshot{start: dp.StartTimestamp(), ts: dp.Timestamp(), count: dp.Count(), sum: dp.Sum(), histogramPart: h}
}

// exponentialPoint is dp as a snapshot, its histogram part in the
// tracker's scratch space.
func (c *Tracker) exponentialPoint(dp pmetric.ExponentialHistogramDataPoint) snapshot {
	h, e := &c.scratch, &c.scratchExponential
	*e = exponentialPart{
		scale: dp.Scale(), zeroCount: dp.ZeroCount(),
		posOffset: dp.Positive().Offset(),
		negOffset: dp.Negative().Offset(), neg: appendCounts(e.neg[:0], dp.Negative().BucketCounts()),
	}
	*h = histogramPart{
		min: dp.Min(), hasMin: dp.HasMin(), max: dp.Max(), hasMax: dp.HasMax(),
		bounds:          h.bounds[:0],
		counts:          appendCounts(h.counts[:0], dp.Positive().BucketCounts()),
		exponentialPart: e,
	}
	return snapshot{start: dp.StartTimestamp(), ts: dp.Timestamp(), count: dp.Count(), sum: dp.Sum(), histogramPart: h}
}

// sumPoint is dp as a snapshot.
func sumPoint(dp pmetric.NumberDataPoint) snapshot {
	p := snapshot{start: dp.StartTimestamp(), ts: dp.Timestamp()}
	if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
		p.setIntValue(dp.IntValue())
	} else {
		p.setValue(dp.DoubleValue())
	}
	return p
}

// metricHash identifies a metric: resource, scope, name and type. A series'
// key is mix(metricHash, hashMap(point attributes)).
func metricHash(resHash, scopeHash uint64, m pmetric.Metric) uint64 {
	return mix(resHash, scopeHash, hashStrings(m.Name(), ""), uint64(m.Type()))
}

func (c *Tracker) convertMetric(ctx context.Context, m pmetric.Metric, base uint64, now time.Time, cv *Result) {
	switch m.Type() {
	case pmetric.MetricTypeSum:
		sum := m.Sum()
		if !sum.IsMonotonic() || sum.AggregationTemporality() != pmetric.AggregationTemporalityCumulative {
			return
		}
		sum.DataPoints().RemoveIf(func(dp pmetric.NumberDataPoint) bool {
			if dp.Flags().NoRecordedValue() {
				return true
			}
			key := mix(base, hashMap(dp.Attributes()))
			p := sumPoint(dp)
			s, out := c.stepPoint(ctx, key, &p, now, sumSeries, m.Name(), cv)
			switch out {
			case drop:
				return true
			case emitDelta:
				dp.SetStartTimestamp(s.prev.ts)
				if p.isInt {
					dp.SetIntValue(p.intValue() - s.prev.intValue())
				} else {
					dp.SetDoubleValue(p.value() - s.prev.value())
				}
			}
			return false
		})
		sum.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)

	case pmetric.MetricTypeHistogram:
		h := m.Histogram()
		if h.AggregationTemporality() != pmetric.AggregationTemporalityCumulative {
			return
		}
		h.DataPoints().RemoveIf(func(dp pmetric.HistogramDataPoint) bool {
			if dp.Flags().NoRecordedValue() {
				return true
			}
			key := mix(base, hashMap(dp.Attributes()))
			p := c.explicitPoint(dp)
			s, out := c.stepPoint(ctx, key, &p, now, histogramSeries, m.Name(), cv)
			switch out {
			case drop:
				return true
			case emitDelta:
				prev := &s.prev
				dp.SetStartTimestamp(prev.ts)
				dp.SetCount(p.count - prev.count)
				if dp.HasSum() {
					dp.SetSum(p.sum - prev.sum)
				}
				deltas := dp.BucketCounts()
				for i := 0; i < deltas.Len(); i++ {
					deltas.SetAt(i, p.counts[i]-prev.counts[i])
				}
				setDeltaMinMax(&p, prev, dp.SetMin, dp.RemoveMin, dp.SetMax, dp.RemoveMax)
			}
			return false
		})
		h.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)

	case pmetric.MetricTypeExponentialHistogram:
		h := m.ExponentialHistogram()
		if h.AggregationTemporality() != pmetric.AggregationTemporalityCumulative {
			return
		}
		h.DataPoints().RemoveIf(func(dp pmetric.ExponentialHistogramDataPoint) bool {
			if dp.Flags().NoRecordedValue() {
				return true
			}
			key := mix(base, hashMap(dp.Attributes()))
			p := c.exponentialPoint(dp)
			s, out := c.stepPoint(ctx, key, &p, now, exponentialSeries, m.Name(), cv)
			switch out {
			case drop:
				return true
			case emitDelta:
				prev := &s.prev
				d := exponentialDelta(&p, prev)
				dp.SetStartTimestamp(prev.ts)
				dp.SetCount(p.count - prev.count)
				if dp.HasSum() {
					dp.SetSum(p.sum - prev.sum)
				}
				dp.SetScale(d.scale)
				dp.SetZeroCount(d.zeroCount)
				dp.Positive().SetOffset(d.posOffset)
				dp.Positive().BucketCounts().FromRaw(d.counts)
				dp.Negative().SetOffset(d.negOffset)
				dp.Negative().BucketCounts().FromRaw(d.neg)
				setDeltaMinMax(&p, prev, dp.SetMin, dp.RemoveMin, dp.SetMax, dp.RemoveMax)
			}
			return false
		})
		h.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)

	case pmetric.MetricTypeSummary:
		if !c.cfg.KeepSummaries {
			c.convertSummary(ctx, m, base, now, cv)
		}
	}
}

// stepPoint moves the series of key to point p and records the step; a
// dropped point is counted under metric's name.
func (c *Tracker) stepPoint(ctx context.Context, key uint64, p *snapshot, now time.Time, kind seriesKind, metric string, cv *Result) (*series, outcome) {
	s, out, reason, moved := c.step(ctx, key, p, now, kind, cv)
	cv.record(key, p.ts, out, moved)
	if out == drop {
		c.dropped(cv, reason, metric)
	}
	return s, out
}

// convertSummary replaces a summary (always cumulative) by a delta histogram
// without buckets, which is sent as a CloudWatch StatisticSet. The 0 and 1
// quantiles, when present, become min and max.
func (c *Tracker) convertSummary(ctx context.Context, m pmetric.Metric, base uint64, now time.Time, cv *Result) {
	src := pmetric.NewSummaryDataPointSlice()
	m.Summary().DataPoints().MoveAndAppendTo(src)
	dst := m.SetEmptyHistogram()
	dst.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	for i := 0; i < src.Len(); i++ {
		sp := src.At(i)
		if sp.Flags().NoRecordedValue() {
			continue
		}
		key := mix(base, hashMap(sp.Attributes()))
		p := snapshot{start: sp.StartTimestamp(), ts: sp.Timestamp(), count: sp.Count(), sum: sp.Sum()}
		s, out := c.stepPoint(ctx, key, &p, now, summarySeries, m.Name(), cv)
		if out == drop {
			continue
		}
		hp := dst.DataPoints().AppendEmpty()
		sp.Attributes().CopyTo(hp.Attributes())
		hp.SetStartTimestamp(p.start)
		hp.SetTimestamp(p.ts)
		hp.SetCount(p.count)
		hp.SetSum(p.sum)
		if out == emitDelta {
			hp.SetStartTimestamp(s.prev.ts)
			hp.SetCount(p.count - s.prev.count)
			hp.SetSum(p.sum - s.prev.sum)
		}
		if hp.Count() > 0 {
			mean := hp.Sum() / float64(hp.Count())
			qs := sp.QuantileValues()
			for j := 0; j < qs.Len(); j++ {
				switch q := qs.At(j); q.Quantile() {
				case 0:
					hp.SetMin(math.Min(q.Value(), mean))
				case 1:
					hp.SetMax(math.Max(q.Value(), mean))
				}
			}
		}
	}
}

// UndoMetrics is Undo for the points of md (a subset handed back by a failed export).
func (c *Tracker) UndoMetrics(md pmetric.Metrics) {
	var records []Record
	rms := md.ResourceMetrics()
	for ri := 0; ri < rms.Len(); ri++ {
		rm := rms.At(ri)
		resHash := hashMap(rm.Resource().Attributes())
		sms := rm.ScopeMetrics()
		for si := 0; si < sms.Len(); si++ {
			sm := sms.At(si)
			scopeHash := hashStrings(sm.Scope().Name(), sm.Scope().Version())
			ms := sm.Metrics()
			for mi := 0; mi < ms.Len(); mi++ {
				m := ms.At(mi)
				base := metricHash(resHash, scopeHash, m)
				add := func(attrs pcommon.Map, ts pcommon.Timestamp) {
					records = append(records, Record{key: mix(base, hashMap(attrs)), ts: ts, sent: true})
				}
				switch m.Type() {
				case pmetric.MetricTypeSum:
					for _, dp := range m.Sum().DataPoints().All() {
						add(dp.Attributes(), dp.Timestamp())
					}
				case pmetric.MetricTypeHistogram:
					// A delta histogram here was a histogram or a summary
					// (convertSummary): its series is under either key.
					summaryBase := mix(resHash, scopeHash, hashStrings(m.Name(), ""), uint64(pmetric.MetricTypeSummary))
					for _, dp := range m.Histogram().DataPoints().All() {
						add(dp.Attributes(), dp.Timestamp())
						records = append(records, Record{key: mix(summaryBase, hashMap(dp.Attributes())), ts: dp.Timestamp(), sent: true})
					}
				case pmetric.MetricTypeExponentialHistogram:
					for _, dp := range m.ExponentialHistogram().DataPoints().All() {
						add(dp.Attributes(), dp.Timestamp())
					}
				}
			}
		}
	}
	c.Undo(records)
}

func appendFloats(dst []float64, src pcommon.Float64Slice) []float64 {
	for i := 0; i < src.Len(); i++ {
		dst = append(dst, src.At(i))
	}
	return dst
}

func appendCounts(dst []uint64, src pcommon.UInt64Slice) []uint64 {
	for i := 0; i < src.Len(); i++ {
		dst = append(dst, src.At(i))
	}
	return dst
}
