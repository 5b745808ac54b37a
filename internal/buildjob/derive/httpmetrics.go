// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derive

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpubuild/otelcol-gpubuild/internal/cumulative"
)

// consumeHTTPMetrics derives api.requests from the request counts of HTTP
// server duration histograms. The input is only read.
func (d *deriver) consumeHTTPMetrics(md pmetric.Metrics, now time.Time) {
	if d.state == nil {
		d.httpResult.Reset() // nothing to save
	}
	defer d.countRefused()
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		var res *resourceEntry
		sms := rm.ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			metrics := sms.At(j).Metrics()
			for k := 0; k < metrics.Len(); k++ {
				m := metrics.At(k)
				if m.Name() != metricHTTPServerDuration && m.Name() != metricHTTPServerDurationO {
					continue
				}
				if res == nil {
					res = d.resources.intern(rm.Resource())
				}
				d.httpServerMetric(res, m, now)
			}
		}
	}
}

func (d *deriver) httpServerMetric(res *resourceEntry, m pmetric.Metric, now time.Time) {
	// The identity of the metric in the cumulative tracker: the resource and
	// the name (no scope: one instrumentation records it).
	metricID := cumulative.NewMetricID(res.attrs, "", "", m.Name(), m.Type())
	switch m.Type() {
	case pmetric.MetricTypeHistogram:
		temporality := m.Histogram().AggregationTemporality()
		points := m.Histogram().DataPoints()
		for i := 0; i < points.Len(); i++ {
			p := points.At(i)
			d.httpPoint(res, metricID, m.Name(), temporality, httpPoint{p.Attributes(), p.StartTimestamp(), p.Timestamp(), p.Count(), p.Flags().NoRecordedValue()}, now)
		}
	case pmetric.MetricTypeExponentialHistogram:
		temporality := m.ExponentialHistogram().AggregationTemporality()
		points := m.ExponentialHistogram().DataPoints()
		for i := 0; i < points.Len(); i++ {
			p := points.At(i)
			d.httpPoint(res, metricID, m.Name(), temporality, httpPoint{p.Attributes(), p.StartTimestamp(), p.Timestamp(), p.Count(), p.Flags().NoRecordedValue()}, now)
		}
	default:
		// A gauge or sum under this name is not what the conventions define.
		d.stats.skipped[skipWrongType]++
	}
}

// httpPoint is what a histogram data point of either kind contributes.
type httpPoint struct {
	attrs      pcommon.Map
	start, ts  pcommon.Timestamp
	count      uint64
	noRecorded bool
}

func (d *deriver) httpPoint(res *resourceEntry, metricID cumulative.MetricID, name string, temporality pmetric.AggregationTemporality, p httpPoint, now time.Time) {
	if p.noRecorded {
		return // a staleness marker, not a measurement
	}
	var n uint64
	switch temporality {
	case pmetric.AggregationTemporalityDelta:
		n = p.count
	case pmetric.AggregationTemporalityCumulative:
		// Counted from its start when first seen (a collector started after
		// the service loses nothing), resets and late or future points
		// handled as everywhere in the distribution; a point that gives no
		// increment still has its attributes checked below.
		n, _ = d.httpTracker.Count(context.Background(), metricID.Series(p.attrs), name, p.start, p.ts, p.count, now, &d.httpResult)
	default:
		d.stats.skipped[skipInvalidValue]++
		return
	}
	class, ok := d.responseClass(p.attrs)
	if !ok {
		return
	}
	method := ""
	if v, ok := firstPresent(p.attrs, attrHTTPRequestMethod, attrHTTPMethodOld); ok {
		if v.Type() != pcommon.ValueTypeStr {
			d.stats.skipped[skipWrongType]++
			return
		}
		method = normalizeMethod(v.Str())
	}
	route, ok := d.httpRoute(p.attrs)
	if !ok {
		return
	}
	if n == 0 {
		return
	}
	d.addRequests(res, route, method, class, d.resolveDims(p.attrs, res), n)
}

// Bounds of the processor's cumulative series memory.
const (
	// cumulativeIdleTTL forgets a series not seen for this long; the SDKs
	// export every 60 s by default, so an hour means the series is gone.
	cumulativeIdleTTL = time.Hour
	// maxCumulativeSeries caps the memory; the least recently updated
	// series is evicted to make room.
	maxCumulativeSeries = 100_000
)
