// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package merge holds one open flush interval of the intervalmerge
// processor: the series of many workers, merged where they add up.
//
// Delta sums (int or double) and delta explicit-bucket histograms are
// summable: the same series from different workers (the resource attributes
// less the worker-identifying ones) becomes one point whose value is the
// sum. Everything else (gauges, cumulative sums, exponential histograms,
// summaries, metrics named as per worker) is kept as it came, with every
// resource attribute, because adding it would change its meaning.
package merge

import (
	"encoding/binary"
	"hash"
	"hash/fnv"
	"math"
	"slices"
	"sort"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpubuild/otelcol-gpubuild/internal/pmetricutil"
)

// Options say what merges.
type Options struct {
	// DropResourceAttributes are removed from the resource of summable
	// metrics: the attributes that tell workers apart.
	DropResourceAttributes []string
	// KeepPerWorker are metric names never merged, even when summable.
	KeepPerWorker []string
}

// Stats counts what one interval saw.
type Stats struct {
	// PointsIn is every data point added; PointsMerged those folded into a
	// point already in the interval.
	PointsIn, PointsMerged int64
	// Conflicts are summable points whose metric name already carries
	// another type, unit, monotonicity or bucket layout in this interval:
	// they are kept as a separate series, never added to the other.
	Conflicts int64
	// ConflictNames are the metric names of the conflicts (for the log).
	ConflictNames []string
}

// Interval is one open interval. Not safe for concurrent use.
type Interval struct {
	opts  Options
	drop  map[string]bool
	keep  map[string]bool
	out   pmetric.Metrics
	res   map[uint64]pmetric.ScopeMetricsSlice
	scope map[uint64]pmetric.MetricSlice
	// metric: key of (resource, scope, name, shape) -> the merged metric.
	metric map[uint64]pmetric.Metric
	// point: key of (metric, attributes) -> index of its point.
	point map[uint64]int
	// shapes: the first shape seen per metric name, to count conflicts.
	shapes map[string]uint64
	passed pmetric.ResourceMetricsSlice
	// kept counts the points kept per worker (each is held in memory).
	kept  int
	stats Stats
	h     hash.Hash64
	buf   []byte
}

// New opens an empty interval.
func New(opts Options) *Interval {
	iv := &Interval{
		opts:   opts,
		drop:   map[string]bool{},
		keep:   map[string]bool{},
		out:    pmetric.NewMetrics(),
		res:    map[uint64]pmetric.ScopeMetricsSlice{},
		scope:  map[uint64]pmetric.MetricSlice{},
		metric: map[uint64]pmetric.Metric{},
		point:  map[uint64]int{},
		shapes: map[string]uint64{},
		h:      fnv.New64a(),
	}
	for _, a := range opts.DropResourceAttributes {
		iv.drop[a] = true
	}
	for _, n := range opts.KeepPerWorker {
		iv.keep[n] = true
	}
	iv.passed = iv.out.ResourceMetrics()
	return iv
}

// Empty tells whether nothing was added.
func (iv *Interval) Empty() bool {
	return iv.stats.PointsIn == 0 && iv.out.ResourceMetrics().Len() == 0
}

// Stats are the counts so far.
func (iv *Interval) Stats() Stats { return iv.stats }

// Held is the number of data points the interval holds in memory: one per
// merged series and one per point kept per worker.
func (iv *Interval) Held() int { return len(iv.point) + iv.kept }

// Metrics closes the interval: the merged and the kept metrics. The
// interval must not be used afterwards.
func (iv *Interval) Metrics() pmetric.Metrics { return iv.out }

// Close closes the interval with the merged points stamped start and end:
// the gateway's interval, not any worker's clock (a worker whose clock runs
// ahead would otherwise carry every worker's merged point with it). The
// points kept per worker keep their own timestamps. The interval must not
// be used afterwards.
func (iv *Interval) Close(start, end pcommon.Timestamp) pmetric.Metrics {
	for _, m := range iv.metric {
		switch m.Type() {
		case pmetric.MetricTypeSum:
			dps := m.Sum().DataPoints()
			for i := 0; i < dps.Len(); i++ {
				dps.At(i).SetStartTimestamp(start)
				dps.At(i).SetTimestamp(end)
			}
		case pmetric.MetricTypeHistogram:
			dps := m.Histogram().DataPoints()
			for i := 0; i < dps.Len(); i++ {
				dps.At(i).SetStartTimestamp(start)
				dps.At(i).SetTimestamp(end)
			}
		}
	}
	return iv.out
}

// Add folds md into the interval. md is not modified or retained.
func (iv *Interval) Add(md pmetric.Metrics) {
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		var kept pmetric.ScopeMetricsSlice
		for j := 0; j < rm.ScopeMetrics().Len(); j++ {
			sm := rm.ScopeMetrics().At(j)
			var keptMetrics pmetric.MetricSlice
			for k := 0; k < sm.Metrics().Len(); k++ {
				m := sm.Metrics().At(k)
				if iv.summable(m) {
					iv.merge(rm.Resource(), rm.SchemaUrl(), sm, m)
					continue
				}
				n := pmetricutil.PointCount(m)
				iv.stats.PointsIn += int64(n)
				iv.kept += n
				if keptMetrics == (pmetric.MetricSlice{}) {
					if kept == (pmetric.ScopeMetricsSlice{}) {
						nrm := iv.passed.AppendEmpty()
						rm.Resource().CopyTo(nrm.Resource())
						nrm.SetSchemaUrl(rm.SchemaUrl())
						kept = nrm.ScopeMetrics()
					}
					nsm := kept.AppendEmpty()
					sm.Scope().CopyTo(nsm.Scope())
					nsm.SetSchemaUrl(sm.SchemaUrl())
					keptMetrics = nsm.Metrics()
				}
				m.CopyTo(keptMetrics.AppendEmpty())
			}
		}
	}
}

func (iv *Interval) summable(m pmetric.Metric) bool {
	if iv.keep[m.Name()] {
		return false
	}
	switch m.Type() {
	case pmetric.MetricTypeSum:
		return m.Sum().AggregationTemporality() == pmetric.AggregationTemporalityDelta
	case pmetric.MetricTypeHistogram:
		return m.Histogram().AggregationTemporality() == pmetric.AggregationTemporalityDelta
	}
	return false
}

func (iv *Interval) merge(res pcommon.Resource, schema string, sm pmetric.ScopeMetrics, m pmetric.Metric) {
	// Resource without the worker-identifying attributes.
	iv.h.Reset()
	iv.hashAttrs(res.Attributes(), iv.drop)
	iv.hashString(schema)
	resKey := iv.h.Sum64()
	scopes, ok := iv.res[resKey]
	if !ok {
		nrm := iv.out.ResourceMetrics().AppendEmpty()
		res.Attributes().Range(func(k string, v pcommon.Value) bool {
			if !iv.drop[k] {
				v.CopyTo(nrm.Resource().Attributes().PutEmpty(k))
			}
			return true
		})
		nrm.SetSchemaUrl(schema)
		scopes = nrm.ScopeMetrics()
		iv.res[resKey] = scopes
	}
	iv.hashString(sm.Scope().Name())
	iv.hashString(sm.Scope().Version())
	iv.hashAttrs(sm.Scope().Attributes(), nil)
	scopeKey := iv.h.Sum64()
	metrics, ok := iv.scope[scopeKey]
	if !ok {
		nsm := scopes.AppendEmpty()
		sm.Scope().CopyTo(nsm.Scope())
		nsm.SetSchemaUrl(sm.SchemaUrl())
		metrics = nsm.Metrics()
		iv.scope[scopeKey] = metrics
	}

	switch m.Type() {
	case pmetric.MetricTypeSum:
		s := m.Sum()
		shape := iv.shape(m, s.IsMonotonic(), nil)
		dst, key := iv.metricFor(scopeKey, shape, m, metrics)
		dps := s.DataPoints()
		for i := 0; i < dps.Len(); i++ {
			iv.addNumber(dst.Sum().DataPoints(), key, dps.At(i))
		}
	case pmetric.MetricTypeHistogram:
		dps := m.Histogram().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			dp := dps.At(i)
			// The bucket layout is part of the shape: points with other
			// bounds are another series, never added bucket by bucket.
			shape := iv.shape(m, false, dp.ExplicitBounds().AsRaw())
			dst, key := iv.metricFor(scopeKey, shape, m, metrics)
			iv.addHistogram(dst.Histogram().DataPoints(), key, dp)
		}
	}
}

// shape identifies what may be added together under one metric name.
func (iv *Interval) shape(m pmetric.Metric, monotonic bool, bounds []float64) uint64 {
	iv.h.Reset()
	iv.hashString(m.Name())
	iv.hashString(m.Unit())
	iv.buf = append(iv.buf[:0], byte(m.Type()))
	if monotonic {
		iv.buf = append(iv.buf, 1)
	}
	for _, b := range bounds {
		iv.buf = binary.LittleEndian.AppendUint64(iv.buf, math.Float64bits(b))
	}
	_, _ = iv.h.Write(iv.buf)
	s := iv.h.Sum64()
	if first, ok := iv.shapes[m.Name()]; !ok {
		iv.shapes[m.Name()] = s
	} else if first != s {
		// Another worker disagrees on the type, unit or buckets: kept
		// apart (not lost, not added to the others), counted once per point below.
		iv.stats.Conflicts++
		if !slices.Contains(iv.stats.ConflictNames, m.Name()) {
			iv.stats.ConflictNames = append(iv.stats.ConflictNames, m.Name())
		}
	}
	return s
}

func (iv *Interval) metricFor(scopeKey, shape uint64, src pmetric.Metric, metrics pmetric.MetricSlice) (pmetric.Metric, uint64) {
	key := scopeKey ^ (shape * 0x9E3779B97F4A7C15)
	if m, ok := iv.metric[key]; ok {
		return m, key
	}
	m := metrics.AppendEmpty()
	m.SetName(src.Name())
	m.SetDescription(src.Description())
	m.SetUnit(src.Unit())
	switch src.Type() {
	case pmetric.MetricTypeSum:
		s := m.SetEmptySum()
		s.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
		s.SetIsMonotonic(src.Sum().IsMonotonic())
	case pmetric.MetricTypeHistogram:
		m.SetEmptyHistogram().SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	}
	iv.metric[key] = m
	return m, key
}

func (iv *Interval) pointKey(metricKey uint64, attrs pcommon.Map) uint64 {
	iv.h.Reset()
	iv.buf = binary.LittleEndian.AppendUint64(iv.buf[:0], metricKey)
	_, _ = iv.h.Write(iv.buf)
	iv.hashAttrs(attrs, nil)
	return iv.h.Sum64()
}

func (iv *Interval) addNumber(dst pmetric.NumberDataPointSlice, metricKey uint64, dp pmetric.NumberDataPoint) {
	iv.stats.PointsIn++
	key := iv.pointKey(metricKey, dp.Attributes())
	if idx, ok := iv.point[key]; ok {
		iv.stats.PointsMerged++
		cur := dst.At(idx)
		switch {
		case cur.ValueType() == pmetric.NumberDataPointValueTypeInt && dp.ValueType() == pmetric.NumberDataPointValueTypeInt:
			cur.SetIntValue(cur.IntValue() + dp.IntValue())
		default:
			cur.SetDoubleValue(numberValue(cur) + numberValue(dp))
		}
		widen(cur, dp.StartTimestamp(), dp.Timestamp())
		return
	}
	iv.point[key] = dst.Len()
	n := dst.AppendEmpty()
	dp.Attributes().CopyTo(n.Attributes())
	n.SetStartTimestamp(dp.StartTimestamp())
	n.SetTimestamp(dp.Timestamp())
	if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
		n.SetIntValue(dp.IntValue())
	} else {
		n.SetDoubleValue(dp.DoubleValue())
	}
}

func (iv *Interval) addHistogram(dst pmetric.HistogramDataPointSlice, metricKey uint64, dp pmetric.HistogramDataPoint) {
	iv.stats.PointsIn++
	key := iv.pointKey(metricKey, dp.Attributes())
	if idx, ok := iv.point[key]; ok {
		iv.stats.PointsMerged++
		cur := dst.At(idx)
		curCount := cur.Count()
		cur.SetCount(curCount + dp.Count())
		if dp.HasSum() || cur.HasSum() {
			cur.SetSum(cur.Sum() + dp.Sum())
		}
		if dp.HasMin() && (!cur.HasMin() || curCount == 0 || dp.Min() < cur.Min()) {
			cur.SetMin(dp.Min())
		}
		if dp.HasMax() && (!cur.HasMax() || curCount == 0 || dp.Max() > cur.Max()) {
			cur.SetMax(dp.Max())
		}
		bc := cur.BucketCounts()
		for i := 0; i < dp.BucketCounts().Len() && i < bc.Len(); i++ {
			bc.SetAt(i, bc.At(i)+dp.BucketCounts().At(i))
		}
		widenH(cur, dp.StartTimestamp(), dp.Timestamp())
		return
	}
	iv.point[key] = dst.Len()
	dp.CopyTo(dst.AppendEmpty())
}

func numberValue(dp pmetric.NumberDataPoint) float64 {
	if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
		return float64(dp.IntValue())
	}
	return dp.DoubleValue()
}

// widen makes the merged point cover every merged point's time range.
func widen(cur pmetric.NumberDataPoint, start, ts pcommon.Timestamp) {
	if start != 0 && (cur.StartTimestamp() == 0 || start < cur.StartTimestamp()) {
		cur.SetStartTimestamp(start)
	}
	if ts > cur.Timestamp() {
		cur.SetTimestamp(ts)
	}
}

func widenH(cur pmetric.HistogramDataPoint, start, ts pcommon.Timestamp) {
	if start != 0 && (cur.StartTimestamp() == 0 || start < cur.StartTimestamp()) {
		cur.SetStartTimestamp(start)
	}
	if ts > cur.Timestamp() {
		cur.SetTimestamp(ts)
	}
}

// hashAttrs feeds the attributes, sorted by key, less skip, into the hash.
func (iv *Interval) hashAttrs(attrs pcommon.Map, skip map[string]bool) {
	keys := make([]string, 0, attrs.Len())
	attrs.Range(func(k string, _ pcommon.Value) bool {
		if !skip[k] {
			keys = append(keys, k)
		}
		return true
	})
	sort.Strings(keys)
	for _, k := range keys {
		v, _ := attrs.Get(k)
		iv.hashString(k)
		iv.buf = append(iv.buf[:0], byte(v.Type()))
		_, _ = iv.h.Write(iv.buf)
		iv.hashString(v.AsString())
	}
}

func (iv *Interval) hashString(s string) {
	iv.buf = binary.LittleEndian.AppendUint64(iv.buf[:0], uint64(len(s)))
	iv.buf = append(iv.buf, s...)
	_, _ = iv.h.Write(iv.buf)
}
