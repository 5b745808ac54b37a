// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package merge

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

var opts = Options{DropResourceAttributes: []string{"service.instance.id"}}

// worker is one worker's request: a delta counter, a delta histogram and a
// GPU gauge, with the worker's instance id on the resource.
func worker(id string, jobs int64, durations []float64, util float64) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "build")
	rm.Resource().Attributes().PutStr("service.instance.id", id)
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName("buildjob")

	c := sm.Metrics().AppendEmpty()
	c.SetName("build.jobs")
	c.SetUnit("{job}")
	s := c.SetEmptySum()
	s.SetIsMonotonic(true)
	s.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	dp := s.DataPoints().AppendEmpty()
	dp.Attributes().PutStr("build.result", "success")
	dp.SetStartTimestamp(100)
	dp.SetTimestamp(200)
	dp.SetIntValue(jobs)

	h := sm.Metrics().AppendEmpty()
	h.SetName("build.job.duration")
	h.SetUnit("s")
	hg := h.SetEmptyHistogram()
	hg.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	hp := hg.DataPoints().AppendEmpty()
	hp.ExplicitBounds().FromRaw([]float64{1, 10})
	counts := make([]uint64, 3)
	for i, d := range durations {
		switch {
		case d <= 1:
			counts[0]++
		case d <= 10:
			counts[1]++
		default:
			counts[2]++
		}
		hp.SetSum(hp.Sum() + d)
		if i == 0 || d < hp.Min() {
			hp.SetMin(d)
		}
		if i == 0 || d > hp.Max() {
			hp.SetMax(d)
		}
	}
	hp.BucketCounts().FromRaw(counts)
	hp.SetCount(uint64(len(durations)))

	g := sm.Metrics().AppendEmpty()
	g.SetName("gpu.utilization")
	g.SetUnit("1")
	g.SetEmptyGauge().DataPoints().AppendEmpty().SetDoubleValue(util)
	return md
}

// find returns the metric named name in the resources whose attributes
// include want.
func find(t *testing.T, md pmetric.Metrics, name string, want map[string]string) []pmetric.Metric {
	t.Helper()
	var out []pmetric.Metric
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		ok := true
		for k, v := range want {
			got, has := rm.Resource().Attributes().Get(k)
			ok = ok && has && got.AsString() == v
		}
		if !ok {
			continue
		}
		for j := 0; j < rm.ScopeMetrics().Len(); j++ {
			ms := rm.ScopeMetrics().At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				if ms.At(k).Name() == name {
					out = append(out, ms.At(k))
				}
			}
		}
	}
	return out
}

func TestDeltaSumsAndHistogramsMergeAcrossWorkers(t *testing.T) {
	iv := New(opts)
	iv.Add(worker("w1", 3, []float64{0.5, 5}, 0.25))
	iv.Add(worker("w2", 4, []float64{20}, 0.75))
	iv.Add(worker("w1", 1, []float64{2}, 0.5)) // a second request of w1 in the same interval
	md := iv.Metrics()

	jobs := find(t, md, "build.jobs", nil)
	require.Len(t, jobs, 1, "one merged series")
	require.Equal(t, 1, jobs[0].Sum().DataPoints().Len())
	p := jobs[0].Sum().DataPoints().At(0)
	assert.Equal(t, int64(8), p.IntValue())
	assert.Equal(t, pcommon.Timestamp(100), p.StartTimestamp())
	assert.Len(t, find(t, md, "build.jobs", map[string]string{"service.name": "build"}), 1, "other resource attributes kept")

	dur := find(t, md, "build.job.duration", nil)
	require.Len(t, dur, 1)
	hp := dur[0].Histogram().DataPoints().At(0)
	assert.Equal(t, uint64(4), hp.Count())
	assert.Equal(t, 27.5, hp.Sum())
	assert.Equal(t, 0.5, hp.Min())
	assert.Equal(t, 20.0, hp.Max())
	assert.Equal(t, []uint64{1, 2, 1}, hp.BucketCounts().AsRaw())

	// Gauges stay per worker, every point with its instance id.
	assert.Len(t, find(t, md, "gpu.utilization", map[string]string{"service.instance.id": "w1"}), 2)
	assert.Len(t, find(t, md, "gpu.utilization", map[string]string{"service.instance.id": "w2"}), 1)
	// The merged resource lost the instance id.
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		if len(find(t, pmetricOf(rm), "build.jobs", nil)) > 0 {
			_, ok := rm.Resource().Attributes().Get("service.instance.id")
			assert.False(t, ok)
		}
	}
	st := iv.Stats()
	assert.Equal(t, int64(9), st.PointsIn)
	assert.Equal(t, int64(4), st.PointsMerged)
	assert.Zero(t, st.Conflicts)
}

func pmetricOf(rm pmetric.ResourceMetrics) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm.CopyTo(md.ResourceMetrics().AppendEmpty())
	return md
}

func TestOtherResourcesAndAttributesStayApart(t *testing.T) {
	iv := New(opts)
	a := worker("w1", 1, nil, 0)
	b := worker("w2", 2, nil, 0)
	b.ResourceMetrics().At(0).Resource().Attributes().PutStr("service.name", "other")
	c := worker("w3", 5, nil, 0)
	c.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints().At(0).Attributes().PutStr("build.result", "failure")
	iv.Add(a)
	iv.Add(b)
	iv.Add(c)
	md := iv.Metrics()
	got := map[string]int64{}
	for _, m := range find(t, md, "build.jobs", nil) {
		for i := 0; i < m.Sum().DataPoints().Len(); i++ {
			r, _ := m.Sum().DataPoints().At(i).Attributes().Get("build.result")
			got[r.Str()] += m.Sum().DataPoints().At(i).IntValue()
		}
	}
	assert.Equal(t, map[string]int64{"success": 3, "failure": 5}, got)
	assert.Len(t, find(t, md, "build.jobs", map[string]string{"service.name": "other"}), 1)
	// Only the (empty) duration histograms of w1 and w3 share a series.
	assert.Equal(t, int64(1), iv.Stats().PointsMerged)
}

func TestConflictingTypeOrUnitIsKeptApartAndCounted(t *testing.T) {
	iv := New(opts)
	iv.Add(worker("w1", 3, nil, 0))
	bad := worker("w2", 1000, nil, 0)
	m := bad.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0)
	m.SetUnit("ms") // same name, another unit
	iv.Add(bad)
	dbl := worker("w3", 0, nil, 0)
	dp := dbl.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints().At(0)
	dp.SetDoubleValue(2.5) // same shape, double value: still adds
	iv.Add(dbl)
	iv.Add(worker("w4", 4, nil, 0))

	md := iv.Metrics()
	byUnit := map[string]float64{}
	for _, m := range find(t, md, "build.jobs", nil) {
		p := m.Sum().DataPoints().At(0)
		v := p.DoubleValue()
		if p.ValueType() == pmetric.NumberDataPointValueTypeInt {
			v = float64(p.IntValue())
		}
		byUnit[m.Unit()] += v
	}
	assert.Equal(t, map[string]float64{"{job}": 9.5, "ms": 1000}, byUnit, "the conflicting series is neither lost nor added to the others")
	assert.Equal(t, int64(1), iv.Stats().Conflicts)
	assert.Equal(t, []string{"build.jobs"}, iv.Stats().ConflictNames)
}

func TestHistogramsWithOtherBoundsStayApart(t *testing.T) {
	iv := New(opts)
	iv.Add(worker("w1", 1, []float64{0.5}, 0))
	other := worker("w2", 1, []float64{0.5}, 0)
	other.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(1).Histogram().DataPoints().At(0).ExplicitBounds().FromRaw([]float64{2, 20})
	iv.Add(other)
	assert.Len(t, find(t, iv.Metrics(), "build.job.duration", nil), 2)
	assert.Equal(t, int64(1), iv.Stats().Conflicts)
}

func TestKeepPerWorkerAndCumulativeStayPerWorker(t *testing.T) {
	iv := New(Options{DropResourceAttributes: []string{"service.instance.id"}, KeepPerWorker: []string{"build.job.duration"}})
	cum := worker("w1", 1, nil, 0)
	cum.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	iv.Add(cum)
	iv.Add(worker("w2", 1, []float64{1}, 0))
	iv.Add(worker("w3", 1, []float64{1}, 0))
	md := iv.Metrics()
	assert.Len(t, find(t, md, "build.job.duration", nil), 3, "kept per worker by name")
	assert.Len(t, find(t, md, "build.jobs", map[string]string{"service.instance.id": "w1"}), 1, "cumulative kept with its worker")
	assert.False(t, iv.Empty())
	assert.True(t, New(opts).Empty())
}
