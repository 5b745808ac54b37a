package derive

import (
	"hash/maphash"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// consumeHTTPMetrics derives api.requests from the request counts of HTTP
// server duration histograms. The input is only read.
func (d *deriver) consumeHTTPMetrics(md pmetric.Metrics, now time.Time) {
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
	switch m.Type() {
	case pmetric.MetricTypeHistogram:
		temporality := m.Histogram().AggregationTemporality()
		points := m.Histogram().DataPoints()
		for i := 0; i < points.Len(); i++ {
			p := points.At(i)
			d.httpPoint(res, m.Name(), temporality, httpPoint{p.Attributes(), p.StartTimestamp(), p.Count(), p.Flags().NoRecordedValue()}, now)
		}
	case pmetric.MetricTypeExponentialHistogram:
		temporality := m.ExponentialHistogram().AggregationTemporality()
		points := m.ExponentialHistogram().DataPoints()
		for i := 0; i < points.Len(); i++ {
			p := points.At(i)
			d.httpPoint(res, m.Name(), temporality, httpPoint{p.Attributes(), p.StartTimestamp(), p.Count(), p.Flags().NoRecordedValue()}, now)
		}
	default:
		// A gauge or sum under this name is not what the conventions define.
		d.stats.skipped[skipWrongType]++
	}
}

// httpPoint is what a histogram data point of either kind contributes.
type httpPoint struct {
	attrs      pcommon.Map
	start      pcommon.Timestamp
	count      uint64
	noRecorded bool
}

func (d *deriver) httpPoint(res *resourceEntry, name string, temporality pmetric.AggregationTemporality, p httpPoint, now time.Time) {
	if p.noRecorded {
		return // a staleness marker, not a measurement
	}
	var n uint64
	switch temporality {
	case pmetric.AggregationTemporalityDelta:
		n = p.count
	case pmetric.AggregationTemporalityCumulative:
		n = d.httpCounts.delta(res.attrs, name, p.attrs, p.start, p.count, now)
	default:
		d.stats.skipped[skipInvalidValue]++
		return
	}
	codeV, ok := firstPresent(p.attrs, attrHTTPResponseStatus, attrHTTPStatusCodeOld)
	if !ok {
		d.stats.skipped[skipMissingAttribute]++
		return
	}
	class, reason, ok := statusClass(codeV)
	if !ok {
		d.stats.skipped[reason]++
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
	route := ""
	if v, ok := p.attrs.Get(attrHTTPRoute); ok {
		if v.Type() != pcommon.ValueTypeStr {
			d.stats.skipped[skipWrongType]++
			return
		}
		route = v.Str()
	}
	if n == 0 {
		return
	}
	d.addRequests(res, route, method, class, d.resolveDims(p.attrs, res), n)
}

// Bounds of the cumulative series memory of the processor.
const (
	// cumulativeIdleTTL forgets a series not seen for this long; the Python
	// SDK exports every 60 s, so an hour means the series is gone.
	cumulativeIdleTTL = time.Hour
	// maxCumulativeSeries caps the memory; further series are not counted
	// until idle ones are forgotten.
	maxCumulativeSeries = 100_000
)

// cumulativeCounts turns cumulative histogram counts into increments. It
// keeps the last count per series (resource, metric name, point attributes).
type cumulativeCounts struct {
	seed           maphash.Seed
	componentStart pcommon.Timestamp
	// horizon is the latest start time among forgotten series: a series
	// seen again after being forgotten must not be counted from zero.
	horizon pcommon.Timestamp
	entries map[uint64]*cumulativeEntry
}

type cumulativeEntry struct {
	start    pcommon.Timestamp
	count    uint64
	lastSeen time.Time
}

func newCumulativeCounts(seed maphash.Seed, componentStart pcommon.Timestamp) *cumulativeCounts {
	return &cumulativeCounts{seed: seed, componentStart: componentStart, entries: map[uint64]*cumulativeEntry{}}
}

// delta returns how many requests a cumulative point adds since the last
// point of its series.
//
// A series seen for the first time counts from zero when it started after
// this component did (the service started or restarted meanwhile);
// otherwise its history is unknown and the point is only a baseline. A new
// start time means the service restarted: the whole count is new. An older
// start time or a smaller count is a late, out-of-order point: nothing new.
func (c *cumulativeCounts) delta(resAttrs pcommon.Map, name string, attrs pcommon.Map, start pcommon.Timestamp, count uint64, now time.Time) uint64 {
	key := hashMap(c.seed, resAttrs)*31 + maphash.String(c.seed, name)*17 + hashMap(c.seed, attrs)
	e, ok := c.entries[key]
	if !ok {
		if len(c.entries) >= maxCumulativeSeries {
			return 0
		}
		c.entries[key] = &cumulativeEntry{start: start, count: count, lastSeen: now}
		if start != 0 && start >= c.componentStart && start > c.horizon {
			return count
		}
		return 0
	}
	e.lastSeen = now
	switch {
	case start > e.start:
		e.start, e.count = start, count
		return count
	case start < e.start:
		return 0
	case count >= e.count:
		n := count - e.count
		e.count = count
		return n
	case start == 0:
		// No start time to tell a restart from a late point: a drop in a
		// monotonic count can only be a restart.
		e.count = count
		return count
	}
	return 0
}

// forgetIdle drops series not seen for cumulativeIdleTTL.
func (c *cumulativeCounts) forgetIdle(now time.Time) {
	for k, e := range c.entries {
		if now.Sub(e.lastSeen) >= cumulativeIdleTTL {
			c.horizon = max(c.horizon, e.start)
			delete(c.entries, k)
		}
	}
}
