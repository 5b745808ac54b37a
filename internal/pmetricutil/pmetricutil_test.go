// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package pmetricutil

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// One metric of each type, with 1 to 5 points (gauge 1 ... summary 5).
func everyType() pmetric.MetricSlice {
	ms := pmetric.NewMetricSlice()
	g := ms.AppendEmpty()
	g.SetName("g")
	g.SetEmptyGauge().DataPoints().AppendEmpty().SetIntValue(7)
	s := ms.AppendEmpty()
	s.SetName("s")
	sum := s.SetEmptySum()
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	sum.SetIsMonotonic(true)
	for range 2 {
		sum.DataPoints().AppendEmpty().SetDoubleValue(1.5)
	}
	h := ms.AppendEmpty()
	h.SetName("h")
	h.SetEmptyHistogram().SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	for i := range 3 {
		h.Histogram().DataPoints().AppendEmpty().SetCount(uint64(i))
	}
	e := ms.AppendEmpty()
	e.SetName("e")
	e.SetEmptyExponentialHistogram().SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	for range 4 {
		e.ExponentialHistogram().DataPoints().AppendEmpty().SetScale(3)
	}
	q := ms.AppendEmpty()
	q.SetName("q")
	q.SetEmptySummary()
	for range 5 {
		q.Summary().DataPoints().AppendEmpty().SetSum(2)
	}
	return ms
}

func TestPointCount(t *testing.T) {
	ms := everyType()
	for i := range ms.Len() {
		assert.Equal(t, i+1, PointCount(ms.At(i)), ms.At(i).Name())
	}
	assert.Zero(t, PointCount(pmetric.NewMetric()), "a metric of no type")
}

// Copying a metric point by point gives back the metric.
func TestCopyMetricPointByPoint(t *testing.T) {
	ms := everyType()
	ms.At(0).SetUnit("By")
	ms.At(0).SetDescription("d")
	ms.At(0).Metadata().PutStr("k", "v")
	for i := range ms.Len() {
		src := ms.At(i)
		dst := pmetric.NewMetric()
		CopyMetricWithoutPoints(src, dst)
		require.Equal(t, src.Type(), dst.Type())
		assert.Zero(t, PointCount(dst))
		for p := range PointCount(src) {
			AppendPoint(src, dst, p)
		}
		want := pmetric.NewMetric()
		src.CopyTo(want)
		assert.Equal(t, want, dst, src.Name())
	}
}
