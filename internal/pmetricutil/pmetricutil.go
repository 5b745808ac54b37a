// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package pmetricutil holds the pdata helpers that more than one component
// needs: the switches over the five metric types that pmetric itself does
// not offer per metric.
package pmetricutil // import "github.com/gpubuild/otelcol-gpubuild/internal/pmetricutil"

import "go.opentelemetry.io/collector/pdata/pmetric"

// PointCount is the number of data points of m, of any type; 0 for an
// empty metric.
func PointCount(m pmetric.Metric) int {
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		return m.Gauge().DataPoints().Len()
	case pmetric.MetricTypeSum:
		return m.Sum().DataPoints().Len()
	case pmetric.MetricTypeHistogram:
		return m.Histogram().DataPoints().Len()
	case pmetric.MetricTypeExponentialHistogram:
		return m.ExponentialHistogram().DataPoints().Len()
	case pmetric.MetricTypeSummary:
		return m.Summary().DataPoints().Len()
	}
	return 0
}

// CopyMetricWithoutPoints makes dst a metric like src (name, description,
// unit, metadata, type, temporality, monotonicity) with no data points.
func CopyMetricWithoutPoints(src, dst pmetric.Metric) {
	dst.SetName(src.Name())
	dst.SetDescription(src.Description())
	dst.SetUnit(src.Unit())
	src.Metadata().CopyTo(dst.Metadata())
	switch src.Type() {
	case pmetric.MetricTypeGauge:
		dst.SetEmptyGauge()
	case pmetric.MetricTypeSum:
		s := dst.SetEmptySum()
		s.SetAggregationTemporality(src.Sum().AggregationTemporality())
		s.SetIsMonotonic(src.Sum().IsMonotonic())
	case pmetric.MetricTypeHistogram:
		dst.SetEmptyHistogram().SetAggregationTemporality(src.Histogram().AggregationTemporality())
	case pmetric.MetricTypeExponentialHistogram:
		dst.SetEmptyExponentialHistogram().SetAggregationTemporality(src.ExponentialHistogram().AggregationTemporality())
	case pmetric.MetricTypeSummary:
		dst.SetEmptySummary()
	}
}

// AppendPoint appends a copy of src's i-th data point to dst, a metric of
// the same type (as CopyMetricWithoutPoints makes it).
func AppendPoint(src, dst pmetric.Metric, i int) {
	switch src.Type() {
	case pmetric.MetricTypeGauge:
		src.Gauge().DataPoints().At(i).CopyTo(dst.Gauge().DataPoints().AppendEmpty())
	case pmetric.MetricTypeSum:
		src.Sum().DataPoints().At(i).CopyTo(dst.Sum().DataPoints().AppendEmpty())
	case pmetric.MetricTypeHistogram:
		src.Histogram().DataPoints().At(i).CopyTo(dst.Histogram().DataPoints().AppendEmpty())
	case pmetric.MetricTypeExponentialHistogram:
		src.ExponentialHistogram().DataPoints().At(i).CopyTo(dst.ExponentialHistogram().DataPoints().AppendEmpty())
	case pmetric.MetricTypeSummary:
		src.Summary().DataPoints().At(i).CopyTo(dst.Summary().DataPoints().AppendEmpty())
	}
}
