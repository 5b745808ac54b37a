// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package cumulativetest builds the cumulative metrics that the tests of
// internal/cumulative and of the exporter send: each metric under a
// resource of its own with the attributes the format-1 fixtures were
// written with (service.name svc, service.instance.id instance-1), so that
// both packages' tests reach the same series keys.
package cumulativetest // import "github.com/gpubuild/otelcol-gpubuild/internal/testing/cumulativetest"

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// NewMetric appends a metric to a fresh resource and scope of md.
func NewMetric(md pmetric.Metrics, name, unit string) pmetric.Metric {
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "svc")
	rm.Resource().Attributes().PutStr("service.instance.id", "instance-1")
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName(name)
	m.SetUnit(unit)
	return m
}

// Sum is the monotonic cumulative sum "requests" with one integer point.
func Sum(start, ts pcommon.Timestamp, value int64, attrs map[string]string) pmetric.Metrics {
	md := pmetric.NewMetrics()
	sum := NewMetric(md, "requests", "{request}").SetEmptySum()
	sum.SetIsMonotonic(true)
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	dp := sum.DataPoints().AppendEmpty()
	dp.SetStartTimestamp(start)
	dp.SetTimestamp(ts)
	dp.SetIntValue(value)
	for k, v := range attrs {
		dp.Attributes().PutStr(k, v)
	}
	return md
}

// FillHistogram sets an explicit-bucket histogram point's buckets and sum;
// its count is the buckets' total.
func FillHistogram(dp pmetric.HistogramDataPoint, bounds []float64, counts []uint64, sum float64) {
	dp.ExplicitBounds().FromRaw(bounds)
	dp.BucketCounts().FromRaw(counts)
	var n uint64
	for _, c := range counts {
		n += c
	}
	dp.SetCount(n)
	dp.SetSum(sum)
}
