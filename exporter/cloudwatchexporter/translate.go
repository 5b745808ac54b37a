// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter"

import (
	"math"
	"path"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpubuild/otelcol-gpubuild/internal/pmetricutil"
)

// datumKind says which of Value, StatisticValues or Values a datum carries.
type datumKind uint8

const (
	kindValue datumKind = iota
	kindStatistics
	kindValues
)

// statisticSet is CloudWatch's StatisticSet.
type statisticSet struct {
	sampleCount, sum, min, max float64
}

// datum is one CloudWatch MetricDatum, already within CloudWatch's limits.
// A flush holds tens of thousands of them while its requests are sent, so
// the fields every kind needs are inline and the rest share one slice
// (96 bytes a datum).
type datum struct {
	name string
	dims []dimension
	// floats points into translation.floats: for kindValues the values, then
	// as many counts; for kindStatistics sampleCount, sum, min and max.
	floats    []float64
	timestamp pcommon.Timestamp
	value     float64 // kindValue
	// point indexes translation.points: the data point this datum comes from.
	// The datums of one point are adjacent.
	point      int32
	resolution int32
	kind       datumKind
	unit       unitID
}

// values and counts are a kindValues datum's Values and Counts.
func (d *datum) values() []float64 { return d.floats[:len(d.floats)/2] }
func (d *datum) counts() []float64 { return d.floats[len(d.floats)/2:] }

// stats is a kindStatistics datum's StatisticValues.
func (d *datum) stats() statisticSet {
	return statisticSet{sampleCount: d.floats[0], sum: d.floats[1], min: d.floats[2], max: d.floats[3]}
}

// pointRef locates a data point in the pmetric.Metrics it was translated from.
type pointRef struct {
	resource, scope, metric, point int32
}

// translation is the result of translating one pmetric.Metrics. Its slices
// are reused from one export to the next (see translator.pool).
type translation struct {
	datums  []datum
	points  []pointRef
	dropped dropCounts
	altered alterCounts
	// resAltered: how the current resource's dimensions were altered.
	resAltered alteration

	// Arenas the datums' slices point into, and scratch space.
	dims    []dimension
	floats  []float64
	resDims []dimension
	buckets []bucket
	values  []float64
	counts  []float64
	reps    []float64
}

func (tr *translation) reset() {
	clear(tr.datums) // drop references to the previous batch's strings
	tr.datums = tr.datums[:0]
	tr.points = tr.points[:0]
	tr.dropped = dropCounts{}
	tr.altered = alterCounts{}
	tr.resAltered = 0
	clear(tr.dims)
	tr.dims = tr.dims[:0]
	tr.floats = tr.floats[:0]
	tr.resDims = tr.resDims[:0]
}

// metricSettings is how one metric is sent, after its rule is applied.
type metricSettings struct {
	drop       bool
	name       string
	nameAlter  alteration // the name was sanitized
	unit       unitConversion
	resolution int32
	filter     *dimensionFilter
}

// compiledRule is a MetricRule ready to be matched.
type compiledRule struct {
	match      string
	glob       bool
	drop       bool
	rename     string
	unit       unitID
	resolution int32
	filter     dimensionFilter
}

// translator turns delta and gauge pdata into CloudWatch datums. It keeps no
// state between calls and is safe for concurrent use.
type translator struct {
	resourceKeys []string
	resolution   int32
	rules        []compiledRule
	noFilter     dimensionFilter
}

func newTranslator(cfg *Config) *translator {
	t := &translator{
		resourceKeys: cfg.ResourceToDimensions,
		resolution:   cfg.StorageResolution,
	}
	for _, r := range cfg.Metrics {
		t.rules = append(t.rules, compiledRule{
			match:      r.Match,
			glob:       strings.ContainsAny(r.Match, `*?[\`),
			drop:       r.Drop,
			rename:     r.Rename,
			unit:       unitIDOf(types.StandardUnit(r.Unit)),
			resolution: r.StorageResolution,
			filter:     dimensionFilter{include: r.IncludeDimensions, exclude: r.ExcludeDimensions},
		})
	}
	return t
}

// settingsFor applies the first rule matching the metric name.
func (t *translator) settingsFor(m pmetric.Metric) metricSettings {
	s := metricSettings{name: m.Name(), unit: mapUnit(m.Unit()), resolution: t.resolution, filter: &t.noFilter}
	for i := range t.rules {
		r := &t.rules[i]
		if r.match != s.name {
			if !r.glob {
				continue
			}
			if ok, _ := path.Match(r.match, s.name); !ok {
				continue
			}
		}
		s.drop = r.drop
		if r.rename != "" {
			s.name = r.rename
		}
		if r.unit != 0 {
			s.unit = unitConversion{unit: r.unit, scale: 1}
		}
		if r.resolution != 0 {
			s.resolution = r.resolution
		}
		s.filter = &r.filter
		break
	}
	return s
}

// translate appends to tr the datums for md, whose sums and histograms must
// already be delta (see deltaConverter); now bounds the accepted timestamps.
// A data point that cannot be sent is counted in tr.dropped and skipped.
func (t *translator) translate(md pmetric.Metrics, now time.Time, tr *translation) {
	w := timeWindow{
		oldest: pcommon.NewTimestampFromTime(now.Add(-maxPointAge)),
		newest: pcommon.NewTimestampFromTime(now.Add(maxPointFuture)),
	}
	rms := md.ResourceMetrics()
	for ri := 0; ri < rms.Len(); ri++ {
		rm := rms.At(ri)
		resStart := len(tr.resDims)
		tr.resDims, tr.resAltered = resourceDimensions(tr.resDims, rm.Resource(), t.resourceKeys)
		resDims := tr.resDims[resStart:len(tr.resDims):len(tr.resDims)]
		sms := rm.ScopeMetrics()
		for si := 0; si < sms.Len(); si++ {
			ms := sms.At(si).Metrics()
			for mi := 0; mi < ms.Len(); mi++ {
				ref := pointRef{resource: int32(ri), scope: int32(si), metric: int32(mi)}
				t.translateMetric(ms.At(mi), ref, resDims, w, tr)
			}
		}
	}
}

type timeWindow struct {
	oldest, newest pcommon.Timestamp
}

func (w timeWindow) check(ts pcommon.Timestamp) (dropReason, bool) {
	switch {
	case ts < w.oldest:
		return reasonTooOld, false
	case ts > w.newest:
		return reasonTooNew, false
	}
	return 0, true
}

func (t *translator) translateMetric(m pmetric.Metric, ref pointRef, resDims []dimension, w timeWindow, tr *translation) {
	s := t.settingsFor(m)
	name, nameOK := sanitizeMetricName(s.name)
	switch {
	case s.drop:
		tr.dropped[reasonRule] += pmetricutil.PointCount(m)
		return
	case !nameOK:
		tr.dropped[reasonInvalid] += pmetricutil.PointCount(m)
		return
	}
	if name != s.name {
		s.nameAlter = 1 << alterMetricName
	}
	s.name = name

	if unconverted(m) {
		tr.dropped[reasonInvalid] += pmetricutil.PointCount(m)
		return
	}
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		t.numberPoints(m.Gauge().DataPoints(), &s, ref, resDims, w, tr)
	case pmetric.MetricTypeSum:
		// A non-monotonic cumulative sum (an up-down counter) is sent as its current value.
		t.numberPoints(m.Sum().DataPoints(), &s, ref, resDims, w, tr)
	case pmetric.MetricTypeHistogram:
		dps := m.Histogram().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			ref.point = int32(i)
			t.histogramPoint(dps.At(i), &s, ref, resDims, w, tr)
		}
	case pmetric.MetricTypeExponentialHistogram:
		dps := m.ExponentialHistogram().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			ref.point = int32(i)
			t.exponentialPoint(dps.At(i), &s, ref, resDims, w, tr)
		}
	}
}

// unconverted tells whether m is cumulative data that deltaConverter turns
// into deltas before it is queued (monotonic sums, histograms, summaries)
// and yet is not: sent as it is, every datum would be wrong.
func unconverted(m pmetric.Metric) bool {
	switch m.Type() {
	case pmetric.MetricTypeSum:
		return m.Sum().IsMonotonic() && m.Sum().AggregationTemporality() != pmetric.AggregationTemporalityDelta
	case pmetric.MetricTypeHistogram:
		return m.Histogram().AggregationTemporality() != pmetric.AggregationTemporalityDelta
	case pmetric.MetricTypeExponentialHistogram:
		return m.ExponentialHistogram().AggregationTemporality() != pmetric.AggregationTemporalityDelta
	case pmetric.MetricTypeSummary:
		return true
	}
	return false
}

func (t *translator) numberPoints(dps pmetric.NumberDataPointSlice, s *metricSettings, ref pointRef, resDims []dimension, w timeWindow, tr *translation) {
	for i := 0; i < dps.Len(); i++ {
		dp := dps.At(i)
		if dp.Flags().NoRecordedValue() {
			continue // a staleness marker, not a measurement
		}
		if r, ok := w.check(dp.Timestamp()); !ok {
			tr.dropped[r]++
			continue
		}
		var v float64
		if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
			v = float64(dp.IntValue())
		} else {
			v = dp.DoubleValue()
		}
		v *= s.unit.scale
		if r, ok := checkValue(v); !ok {
			tr.dropped[r]++
			continue
		}
		ref.point = int32(i)
		d := tr.newDatum(s, ref, dp.Timestamp(), resDims, dp.Attributes())
		d.kind = kindValue
		d.value = v
	}
}

// newDatum appends a datum for a new data point and returns it for the caller to fill.
func (tr *translation) newDatum(s *metricSettings, ref pointRef, ts pcommon.Timestamp, resDims []dimension, attrs pcommon.Map) *datum {
	start := len(tr.dims)
	var alt alteration
	tr.dims, alt = appendDimensions(tr.dims, resDims, attrs, s.filter)
	if alt |= tr.resAltered | s.nameAlter; alt != 0 {
		tr.altered.add(alt)
	}
	tr.points = append(tr.points, ref)
	tr.datums = append(tr.datums, datum{
		name:       s.name,
		unit:       s.unit.unit,
		dims:       tr.dims[start:len(tr.dims):len(tr.dims)],
		timestamp:  ts,
		resolution: s.resolution,
		point:      int32(len(tr.points) - 1),
	})
	return &tr.datums[len(tr.datums)-1]
}

// moreDatums appends a datum that continues the previous one (same point,
// name, dimensions, timestamp) for the next 150 values of a histogram.
func (tr *translation) moreDatums() *datum {
	tr.datums = append(tr.datums, tr.datums[len(tr.datums)-1])
	return &tr.datums[len(tr.datums)-1]
}

func (t *translator) histogramPoint(dp pmetric.HistogramDataPoint, s *metricSettings, ref pointRef, resDims []dimension, w timeWindow, tr *translation) {
	if dp.Flags().NoRecordedValue() || dp.Count() == 0 {
		return // nothing was observed; CloudWatch has nothing to add
	}
	if r, ok := w.check(dp.Timestamp()); !ok {
		tr.dropped[r]++
		return
	}
	hs, r, ok := summarize(dp.Count(), dp.HasSum(), dp.Sum(), dp.HasMin(), dp.Min(), dp.HasMax(), dp.Max(), s.unit.scale)
	if !ok {
		tr.dropped[r]++
		return
	}
	if dp.BucketCounts().Len() <= 1 {
		t.statistics(hs, s, ref, dp.Timestamp(), resDims, dp.Attributes(), tr)
		return
	}
	tr.buckets, r, ok = explicitBuckets(tr.buckets[:0], dp, s.unit.scale)
	if !ok {
		tr.dropped[r]++
		return
	}
	t.distribution(hs, s, ref, dp.Timestamp(), resDims, dp.Attributes(), tr)
}

func (t *translator) exponentialPoint(dp pmetric.ExponentialHistogramDataPoint, s *metricSettings, ref pointRef, resDims []dimension, w timeWindow, tr *translation) {
	if dp.Flags().NoRecordedValue() || dp.Count() == 0 {
		return
	}
	if r, ok := w.check(dp.Timestamp()); !ok {
		tr.dropped[r]++
		return
	}
	hs, r, ok := summarize(dp.Count(), dp.HasSum(), dp.Sum(), dp.HasMin(), dp.Min(), dp.HasMax(), dp.Max(), s.unit.scale)
	if !ok {
		tr.dropped[r]++
		return
	}
	tr.buckets, r, ok = exponentialBuckets(tr.buckets[:0], dp, s.unit.scale)
	if !ok {
		tr.dropped[r]++
		return
	}
	t.distribution(hs, s, ref, dp.Timestamp(), resDims, dp.Attributes(), tr)
}

// summarize checks and scales a histogram's count, sum, min and max.
func summarize(count uint64, hasSum bool, sum float64, hasMin bool, minV float64, hasMax bool, maxV float64, scale float64) (histogramSummary, dropReason, bool) {
	hs := histogramSummary{
		count: float64(count),
		sum:   sum * scale, hasSum: hasSum,
		min: minV * scale, hasMin: hasMin,
		max: maxV * scale, hasMax: hasMax,
	}
	for _, v := range [...]struct {
		has bool
		v   float64
	}{{hasSum, hs.sum}, {hasMin, hs.min}, {hasMax, hs.max}} {
		if r, ok := checkValue(v.v); v.has && !ok {
			return hs, r, false
		}
	}
	if hs.hasMin && hs.hasMax && hs.min > hs.max {
		return hs, reasonInvalid, false
	}
	// count observations of at least min and at most max cannot add up to
	// less than count*min or more than count*max (beyond rounding).
	if hs.hasSum {
		tol := 1e-9 * math.Max(math.Abs(hs.sum), 1)
		if (hs.hasMin && hs.sum < hs.count*hs.min-tol-1e-9*math.Abs(hs.count*hs.min)) ||
			(hs.hasMax && hs.sum > hs.count*hs.max+tol+1e-9*math.Abs(hs.count*hs.max)) {
			return hs, reasonInconsistentHistogram, false
		}
	}
	return hs, 0, true
}

// statistics sends a histogram without buckets as a StatisticSet. CloudWatch
// needs all four statistics; without min or max the mean stands in for them.
func (t *translator) statistics(hs histogramSummary, s *metricSettings, ref pointRef, ts pcommon.Timestamp, resDims []dimension, attrs pcommon.Map, tr *translation) {
	if !hs.hasSum {
		tr.dropped[reasonInvalid]++
		return
	}
	mean := hs.sum / hs.count
	st := statisticSet{sampleCount: hs.count, sum: hs.sum, min: mean, max: mean}
	if hs.hasMin {
		st.min = hs.min
	}
	if hs.hasMax {
		st.max = hs.max
	}
	st.min, st.max = math.Min(st.min, st.max), math.Max(st.min, st.max)
	if _, ok := checkValue(st.min); !ok {
		tr.dropped[reasonOutOfRange]++
		return
	}
	d := tr.newDatum(s, ref, ts, resDims, attrs)
	d.kind = kindStatistics
	a := len(tr.floats)
	tr.floats = append(tr.floats, st.sampleCount, st.sum, st.min, st.max)
	d.floats = tr.floats[a : a+4 : a+4]
}

// distribution sends tr.buckets as Values/Counts, 150 values per datum.
func (t *translator) distribution(hs histogramSummary, s *metricSettings, ref pointRef, ts pcommon.Timestamp, resDims []dimension, attrs pcommon.Map, tr *translation) {
	tr.values, tr.counts, tr.reps = representatives(tr.buckets, hs, tr.values[:0], tr.counts[:0], tr.reps)
	for _, v := range tr.values {
		if r, ok := checkValue(v); !ok {
			tr.dropped[r]++
			return
		}
	}
	if len(tr.values) == 0 {
		return
	}
	d := tr.newDatum(s, ref, ts, resDims, attrs)
	d.kind = kindValues
	for start := 0; start < len(tr.values); start += maxValuesPerDatum {
		end := min(start+maxValuesPerDatum, len(tr.values))
		if start > 0 {
			d = tr.moreDatums()
		}
		a := len(tr.floats)
		tr.floats = append(tr.floats, tr.values[start:end]...)
		tr.floats = append(tr.floats, tr.counts[start:end]...)
		n := end - start
		d.floats = tr.floats[a : a+2*n : a+2*n]
	}
}
