// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derive

import (
	"slices"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// metricsBuilder turns series into OTLP metrics: one ResourceMetrics per
// resource, metrics in a fixed order.
type metricsBuilder struct {
	scopeName  string
	dimensions []string
	cumulative bool
	start, now pcommon.Timestamp
	byResource map[*resourceEntry]*resourceSeries
}

type resourceSeries struct {
	res    *resourceEntry
	series [numFamilies][]*series
	active []*series
}

func newMetricsBuilder(scopeName string, dimensions []string, cumulative bool, start, now pcommon.Timestamp) *metricsBuilder {
	return &metricsBuilder{scopeName: scopeName, dimensions: dimensions, cumulative: cumulative, start: start, now: now, byResource: map[*resourceEntry]*resourceSeries{}}
}

func (b *metricsBuilder) forResource(res *resourceEntry) *resourceSeries {
	rs, ok := b.byResource[res]
	if !ok {
		rs = &resourceSeries{res: res}
		b.byResource[res] = rs
	}
	return rs
}

// add reports s unless it is empty, and tells whether it did.
func (b *metricsBuilder) add(s *series) bool {
	if s.count == 0 {
		return false
	}
	rs := b.forResource(s.labels.res)
	rs.series[s.labels.fam] = append(rs.series[s.labels.fam], s)
	return true
}

func (b *metricsBuilder) addActive(g *series) {
	rs := b.forResource(g.labels.res)
	rs.active = append(rs.active, g)
}

type familyNames struct {
	count, countUnit, duration, histUnit string
}

// A family without a count name emits its histogram only.
var familyMetricNames = [numFamilies]familyNames{
	familyJobs:      {metricBuildJobs, "{job}", metricBuildJobDuration, "s"},
	familyStages:    {metricBuildStageRuns, "{run}", metricBuildStageDuration, "s"},
	familyAPI:       {metricAPIRequests, "{request}", metricAPIRequestDuration, "s"},
	familyGPUEnergy: {"", "", metricBuildGPUEnergy, "J"},
	familyGPUBusy:   {"", "", metricBuildGPUBusyTime, "s"},
	familyGPUMemory: {"", "", metricBuildGPUMemoryPeak, "By"},

	familyStageGPUEnergy: {"", "", metricBuildStageGPUEnergy, "J"},
	familyStageGPUBusy:   {"", "", metricBuildStageGPUBusyTime, "s"},
	familyStageGPUMemory: {"", "", metricBuildStageGPUMemoryPeak, "By"},

	familyGPUSMActivity:          {"", "", metricBuildGPUSMActivity, "1"},
	familyGPUTensorActivity:      {"", "", metricBuildGPUTensor, "1"},
	familyStageGPUSMActivity:     {"", "", metricBuildStageGPUSMActivity, "1"},
	familyStageGPUTensorActivity: {"", "", metricBuildStageGPUTensor, "1"},
}

func (b *metricsBuilder) build() pmetric.Metrics {
	md := pmetric.NewMetrics()
	resources := make([]*resourceSeries, 0, len(b.byResource))
	for _, rs := range b.byResource {
		resources = append(resources, rs)
	}
	slices.SortFunc(resources, func(x, y *resourceSeries) int { return compareUint64(x.res.id, y.res.id) })
	temporality := pmetric.AggregationTemporalityDelta
	if b.cumulative {
		temporality = pmetric.AggregationTemporalityCumulative
	}
	for _, rs := range resources {
		rm := md.ResourceMetrics().AppendEmpty()
		rs.res.attrs.CopyTo(rm.Resource().Attributes())
		sm := rm.ScopeMetrics().AppendEmpty()
		sm.Scope().SetName(b.scopeName)
		for fam := range numFamilies {
			list := rs.series[fam]
			if len(list) == 0 {
				continue
			}
			names := familyMetricNames[fam]
			var sum pmetric.Metric
			if names.count != "" {
				sum = sm.Metrics().AppendEmpty()
				sum.SetName(names.count)
				sum.SetUnit(names.countUnit)
				sum.SetEmptySum().SetIsMonotonic(true)
				sum.Sum().SetAggregationTemporality(temporality)
			}
			var hist pmetric.HistogramDataPointSlice
			hasHist := false
			for _, s := range list {
				// Every series holds at least one count: add skips empty ones.
				if names.count != "" {
					dp := sum.Sum().DataPoints().AppendEmpty()
					b.setPoint(dp.Attributes(), dp, s)
					dp.SetIntValue(s.count)
				}
				if s.hist.n == 0 {
					continue
				}
				if !hasHist {
					m := sm.Metrics().AppendEmpty()
					m.SetName(names.duration)
					m.SetUnit(names.histUnit)
					m.SetEmptyHistogram().SetAggregationTemporality(temporality)
					hist, hasHist = m.Histogram().DataPoints(), true
				}
				b.setHistogramPoint(hist.AppendEmpty(), s)
			}
		}
		if len(rs.active) > 0 {
			m := sm.Metrics().AppendEmpty()
			m.SetName(metricBuildJobsActive)
			m.SetUnit("{job}")
			points := m.SetEmptyGauge().DataPoints()
			for _, g := range rs.active {
				dp := points.AppendEmpty()
				dp.SetTimestamp(b.now)
				b.putAttributes(dp.Attributes(), &g.labels)
				dp.SetIntValue(g.count)
			}
		}
	}
	return md
}

// timedPoint is implemented by number and histogram data points.
type timedPoint interface {
	SetStartTimestamp(pcommon.Timestamp)
	SetTimestamp(pcommon.Timestamp)
}

func (b *metricsBuilder) setPoint(attrs pcommon.Map, dp timedPoint, s *series) {
	dp.SetStartTimestamp(b.start)
	dp.SetTimestamp(b.now)
	b.putAttributes(attrs, &s.labels)
}

func (b *metricsBuilder) setHistogramPoint(hp pmetric.HistogramDataPoint, s *series) {
	b.setPoint(hp.Attributes(), hp, s)
	hp.SetCount(s.hist.n)
	hp.SetSum(s.hist.sum)
	hp.SetMin(s.hist.min)
	hp.SetMax(s.hist.max)
	hp.ExplicitBounds().FromRaw(s.hist.bounds)
	hp.BucketCounts().FromRaw(s.hist.counts)
}

func (b *metricsBuilder) putAttributes(attrs pcommon.Map, l *seriesLabels) {
	switch l.fam {
	case familyJobs, familyGPUEnergy, familyGPUBusy, familyGPUMemory, familyGPUSMActivity, familyGPUTensorActivity:
		if l.a != "" {
			attrs.PutStr(attrBuildResult, l.a)
		}
	case familyStages, familyStageGPUEnergy, familyStageGPUBusy, familyStageGPUMemory, familyStageGPUSMActivity, familyStageGPUTensorActivity:
		attrs.PutStr(attrBuildStage, l.a)
		attrs.PutStr(attrBuildResult, l.b)
	case familyAPI:
		if l.a != "" {
			attrs.PutStr(attrHTTPRoute, l.a)
		}
		if l.b != "" {
			attrs.PutStr(attrHTTPMethod, l.b)
		}
		attrs.PutStr(attrHTTPStatusClass, l.c)
	}
	for i, v := range l.dims {
		v.putTo(attrs, b.dimensions[i])
	}
}

func compareUint64(x, y uint64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}
