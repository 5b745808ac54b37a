// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package translate // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/translate"

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
	unit       UnitID
	resolution int32
	filter     dimensionFilter
}

// Translator turns delta and gauge pdata into CloudWatch datums. It keeps no
// state between calls and is safe for concurrent use.
type Translator struct {
	resourceKeys []string
	resolution   int32
	rules        []compiledRule
	noFilter     dimensionFilter
}

// Config is what the translator is told: the exporter's
// resource_to_dimensions, storage_resolution and metrics rules.
type Config struct {
	ResourceToDimensions []string
	StorageResolution    int32
	Rules                []Rule
}

// Rule changes how the metrics whose name it matches are sent (the
// exporter's MetricRule, validated).
type Rule struct {
	Match             string
	Drop              bool
	Rename            string
	Unit              string
	StorageResolution int32
	IncludeDimensions []string
	ExcludeDimensions []string
}

// DefaultStorageResolution is storage_resolution's default.
const DefaultStorageResolution = 60

// DefaultResourceToDimensions keeps series apart per service and per GPU,
// never per process (service.instance.id would make every restart a new
// set of billed metrics).
func DefaultResourceToDimensions() []string {
	return []string{"service.name", "deployment.environment.name", "hw.id", "gpu.index", "hw.model"}
}

// NewTranslator returns a translator for cfg.
func NewTranslator(cfg Config) *Translator {
	t := &Translator{
		resourceKeys: cfg.ResourceToDimensions,
		resolution:   cfg.StorageResolution,
	}
	for _, r := range cfg.Rules {
		t.rules = append(t.rules, compiledRule{
			match:      r.Match,
			glob:       strings.ContainsAny(r.Match, `*?[\`),
			drop:       r.Drop,
			rename:     r.Rename,
			unit:       UnitIDOf(types.StandardUnit(r.Unit)),
			resolution: r.StorageResolution,
			filter:     dimensionFilter{include: r.IncludeDimensions, exclude: r.ExcludeDimensions},
		})
	}
	return t
}

// settingsFor applies the first rule matching the metric name.
func (t *Translator) settingsFor(m pmetric.Metric) metricSettings {
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

// Translate appends to tr the datums for md, whose sums and histograms must
// already be delta (see deltaConverter); now bounds the accepted timestamps.
// A data point that cannot be sent is counted in tr.dropped and skipped.
func (t *Translator) Translate(md pmetric.Metrics, now time.Time, tr *Translation) {
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
				ref := PointRef{Resource: int32(ri), Scope: int32(si), Metric: int32(mi)}
				t.translateMetric(ms.At(mi), ref, resDims, w, tr)
			}
		}
	}
}

type timeWindow struct {
	oldest, newest pcommon.Timestamp
}

func (w timeWindow) check(ts pcommon.Timestamp) (DropReason, bool) {
	switch {
	case ts < w.oldest:
		return reasonTooOld, false
	case ts > w.newest:
		return ReasonTooNew, false
	}
	return 0, true
}

func (t *Translator) translateMetric(m pmetric.Metric, ref PointRef, resDims []Dimension, w timeWindow, tr *Translation) {
	s := t.settingsFor(m)
	name, nameOK := sanitizeMetricName(s.name)
	switch {
	case s.drop:
		tr.Dropped[reasonRule] += pmetricutil.PointCount(m)
		return
	case !nameOK:
		tr.Dropped[reasonInvalid] += pmetricutil.PointCount(m)
		return
	}
	if name != s.name {
		s.nameAlter = 1 << alterMetricName
	}
	s.name = name

	if unconverted(m) {
		tr.Dropped[reasonInvalid] += pmetricutil.PointCount(m)
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
			ref.Point = int32(i)
			t.histogramPoint(dps.At(i), &s, ref, resDims, w, tr)
		}
	case pmetric.MetricTypeExponentialHistogram:
		dps := m.ExponentialHistogram().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			ref.Point = int32(i)
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

func (t *Translator) numberPoints(dps pmetric.NumberDataPointSlice, s *metricSettings, ref PointRef, resDims []Dimension, w timeWindow, tr *Translation) {
	for i := 0; i < dps.Len(); i++ {
		dp := dps.At(i)
		if dp.Flags().NoRecordedValue() {
			continue // a staleness marker, not a measurement
		}
		if r, ok := w.check(dp.Timestamp()); !ok {
			tr.Dropped[r]++
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
			tr.Dropped[r]++
			continue
		}
		ref.Point = int32(i)
		d := tr.newDatum(s, ref, dp.Timestamp(), resDims, dp.Attributes())
		d.Kind = KindValue
		d.Value = v
	}
}

// newDatum appends a datum for a new data point and returns it for the caller to fill.
func (tr *Translation) newDatum(s *metricSettings, ref PointRef, ts pcommon.Timestamp, resDims []Dimension, attrs pcommon.Map) *Datum {
	start := len(tr.dims)
	var alt alteration
	tr.dims, alt = appendDimensions(tr.dims, resDims, attrs, s.filter)
	if alt |= tr.resAltered | s.nameAlter; alt != 0 {
		tr.Altered.add(alt)
	}
	tr.Points = append(tr.Points, ref)
	tr.Datums = append(tr.Datums, Datum{
		Name:       s.name,
		Unit:       s.unit.unit,
		Dims:       tr.dims[start:len(tr.dims):len(tr.dims)],
		Timestamp:  ts,
		Resolution: s.resolution,
		Point:      int32(len(tr.Points) - 1),
	})
	return &tr.Datums[len(tr.Datums)-1]
}

// moreDatums appends a datum that continues the previous one (same point,
// name, dimensions, timestamp) for the next 150 values of a histogram.
func (tr *Translation) moreDatums() *Datum {
	tr.Datums = append(tr.Datums, tr.Datums[len(tr.Datums)-1])
	return &tr.Datums[len(tr.Datums)-1]
}

func (t *Translator) histogramPoint(dp pmetric.HistogramDataPoint, s *metricSettings, ref PointRef, resDims []Dimension, w timeWindow, tr *Translation) {
	if dp.Flags().NoRecordedValue() || dp.Count() == 0 {
		return // nothing was observed; CloudWatch has nothing to add
	}
	if r, ok := w.check(dp.Timestamp()); !ok {
		tr.Dropped[r]++
		return
	}
	hs, r, ok := summarize(dp.Count(), dp.HasSum(), dp.Sum(), dp.HasMin(), dp.Min(), dp.HasMax(), dp.Max(), s.unit.scale)
	if !ok {
		tr.Dropped[r]++
		return
	}
	if dp.BucketCounts().Len() <= 1 {
		t.statistics(hs, s, ref, dp.Timestamp(), resDims, dp.Attributes(), tr)
		return
	}
	tr.buckets, r, ok = explicitBuckets(tr.buckets[:0], dp, s.unit.scale)
	if !ok {
		tr.Dropped[r]++
		return
	}
	t.distribution(hs, s, ref, dp.Timestamp(), resDims, dp.Attributes(), tr)
}

func (t *Translator) exponentialPoint(dp pmetric.ExponentialHistogramDataPoint, s *metricSettings, ref PointRef, resDims []Dimension, w timeWindow, tr *Translation) {
	if dp.Flags().NoRecordedValue() || dp.Count() == 0 {
		return
	}
	if r, ok := w.check(dp.Timestamp()); !ok {
		tr.Dropped[r]++
		return
	}
	hs, r, ok := summarize(dp.Count(), dp.HasSum(), dp.Sum(), dp.HasMin(), dp.Min(), dp.HasMax(), dp.Max(), s.unit.scale)
	if !ok {
		tr.Dropped[r]++
		return
	}
	tr.buckets, r, ok = exponentialBuckets(tr.buckets[:0], dp, s.unit.scale)
	if !ok {
		tr.Dropped[r]++
		return
	}
	t.distribution(hs, s, ref, dp.Timestamp(), resDims, dp.Attributes(), tr)
}

// summarize checks and scales a histogram's count, sum, min and max.
func summarize(count uint64, hasSum bool, sum float64, hasMin bool, minV float64, hasMax bool, maxV float64, scale float64) (histogramSummary, DropReason, bool) {
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
func (t *Translator) statistics(hs histogramSummary, s *metricSettings, ref PointRef, ts pcommon.Timestamp, resDims []Dimension, attrs pcommon.Map, tr *Translation) {
	if !hs.hasSum {
		tr.Dropped[reasonInvalid]++
		return
	}
	mean := hs.sum / hs.count
	st := StatisticSet{SampleCount: hs.count, Sum: hs.sum, Min: mean, Max: mean}
	if hs.hasMin {
		st.Min = hs.min
	}
	if hs.hasMax {
		st.Max = hs.max
	}
	st.Min, st.Max = math.Min(st.Min, st.Max), math.Max(st.Min, st.Max)
	if _, ok := checkValue(st.Min); !ok {
		tr.Dropped[reasonOutOfRange]++
		return
	}
	d := tr.newDatum(s, ref, ts, resDims, attrs)
	d.Kind = KindStatistics
	a := len(tr.floats)
	tr.floats = append(tr.floats, st.SampleCount, st.Sum, st.Min, st.Max)
	d.Floats = tr.floats[a : a+4 : a+4]
}

// distribution sends tr.buckets as Values/Counts, 150 values per datum.
func (t *Translator) distribution(hs histogramSummary, s *metricSettings, ref PointRef, ts pcommon.Timestamp, resDims []Dimension, attrs pcommon.Map, tr *Translation) {
	tr.values, tr.counts, tr.reps = representatives(tr.buckets, hs, tr.values[:0], tr.counts[:0], tr.reps)
	for _, v := range tr.values {
		if r, ok := checkValue(v); !ok {
			tr.Dropped[r]++
			return
		}
	}
	if len(tr.values) == 0 {
		return
	}
	d := tr.newDatum(s, ref, ts, resDims, attrs)
	d.Kind = KindValues
	for start := 0; start < len(tr.values); start += maxValuesPerDatum {
		end := min(start+maxValuesPerDatum, len(tr.values))
		if start > 0 {
			d = tr.moreDatums()
		}
		a := len(tr.floats)
		tr.floats = append(tr.floats, tr.values[start:end]...)
		tr.floats = append(tr.floats, tr.counts[start:end]...)
		n := end - start
		d.Floats = tr.floats[a : a+2*n : a+2*n]
	}
}
