// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package translate // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/translate"

import (
	"math"
	"time"
)

// PutMetricData limits, from the CloudWatch API reference.
const (
	MaxDatumsPerRequest = 1000
	// MaxRequestBytes bounds the serialized (uncompressed CBOR) request body.
	// CloudWatch documents "1 MB"; 10^6 is under either reading of it.
	MaxRequestBytes   = 1_000_000
	maxValuesPerDatum = 150
	maxDimensions     = 30
	maxDimNameLen     = 255
	maxDimValueLen    = 1024
	MaxMetricNameLen  = 255
	MaxNamespaceLen   = 255

	// CloudWatch accepts timestamps from two weeks in the past to two hours in
	// the future. The margin keeps a point that passes here from crossing the
	// edge before its request reaches CloudWatch.
	maxPointAge     = 14*24*time.Hour - timestampMargin
	maxPointFuture  = 2*time.Hour - timestampMargin
	timestampMargin = 5 * time.Minute
)

// CloudWatch rejects values whose magnitude is above 2^360 or, unless zero, below 2^-360.
var (
	maxMagnitude = math.Ldexp(1, 360)
	minMagnitude = math.Ldexp(1, -360)
)

// DropReason says why a data point was not sent; it is the `reason`
// attribute of the points_dropped telemetry counter.
type DropReason uint8

// The drop reasons.
const (
	reasonNaNOrInf DropReason = iota
	reasonOutOfRange
	reasonTooOld
	ReasonTooNew
	ReasonCumulativeBaseline
	ReasonOutOfOrder
	ReasonDuplicate
	ReasonBucketLayoutChanged
	reasonInvalid
	reasonRule
	ReasonRejected
	reasonInconsistentHistogram
	numDropReasons
)

var dropReasonNames = [numDropReasons]string{
	reasonNaNOrInf:              "nan_or_inf",
	reasonOutOfRange:            "out_of_range",
	reasonTooOld:                "too_old",
	ReasonTooNew:                "too_new",
	ReasonCumulativeBaseline:    "cumulative_baseline",
	ReasonOutOfOrder:            "out_of_order",
	ReasonDuplicate:             "duplicate",
	ReasonBucketLayoutChanged:   "bucket_layout_changed",
	reasonInvalid:               "invalid",
	reasonRule:                  "rule",
	ReasonRejected:              "rejected",
	reasonInconsistentHistogram: "inconsistent_histogram",
}

func (r DropReason) String() string { return dropReasonNames[r] }

// AlterReason says how a data point sent was changed to what CloudWatch
// accepts; it is the `reason` attribute of the points_altered counter.
type AlterReason uint8

const (
	alterMetricName       AlterReason = iota // control characters, invalid UTF-8 or length
	alterDimension                           // a dimension name or value: non-printable-ASCII characters or length
	alterDimensionDropped                    // a dimension left out: its name or value is blank once sanitized
	alterSeriesOverflow                      // folded into the metric's overflow series (max_series_per_metric)
	numAlterReasons
)

var alterReasonNames = [numAlterReasons]string{
	alterMetricName:       "metric_name_sanitized",
	alterDimension:        "dimension_sanitized",
	alterDimensionDropped: "dimension_dropped",
	alterSeriesOverflow:   "series_overflow",
}

func (r AlterReason) String() string { return alterReasonNames[r] }

// AlterCounts counts altered data points by reason.
type AlterCounts [numAlterReasons]int

// add counts one data point altered as a says.
func (c *AlterCounts) add(a alteration) {
	for r := range c {
		if a&(1<<r) != 0 {
			c[r]++
		}
	}
}

// DropCounts counts dropped data points by reason.
type DropCounts [numDropReasons]int

// Add adds o to d.
func (d *DropCounts) Add(o *DropCounts) {
	for i := range d {
		d[i] += o[i]
	}
}

// Total is the number of data points dropped.
func (d *DropCounts) Total() int {
	n := 0
	for _, c := range d {
		n += c
	}
	return n
}

// checkValue says why v cannot be sent to CloudWatch, if it cannot.
func checkValue(v float64) (DropReason, bool) {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return reasonNaNOrInf, false
	case v == 0:
		return 0, true
	}
	a := math.Abs(v)
	if a > maxMagnitude || a < minMagnitude {
		return reasonOutOfRange, false
	}
	return 0, true
}
