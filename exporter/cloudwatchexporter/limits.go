// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter"

import (
	"math"
	"time"
)

// PutMetricData limits, from the CloudWatch API reference.
const (
	maxDatumsPerRequest = 1000
	// maxRequestBytes bounds the serialized (uncompressed CBOR) request body.
	// CloudWatch documents "1 MB"; 10^6 is under either reading of it.
	maxRequestBytes   = 1_000_000
	maxValuesPerDatum = 150
	maxDimensions     = 30
	maxDimNameLen     = 255
	maxDimValueLen    = 1024
	maxMetricNameLen  = 255
	maxNamespaceLen   = 255

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

// dropReason says why a data point was not sent; it is the `reason`
// attribute of the points_dropped telemetry counter.
type dropReason uint8

const (
	reasonNaNOrInf dropReason = iota
	reasonOutOfRange
	reasonTooOld
	reasonTooNew
	reasonCumulativeBaseline
	reasonOutOfOrder
	reasonDuplicate
	reasonBucketLayoutChanged
	reasonInvalid
	reasonRule
	reasonRejected
	reasonInconsistentHistogram
	numDropReasons
)

var dropReasonNames = [numDropReasons]string{
	reasonNaNOrInf:              "nan_or_inf",
	reasonOutOfRange:            "out_of_range",
	reasonTooOld:                "too_old",
	reasonTooNew:                "too_new",
	reasonCumulativeBaseline:    "cumulative_baseline",
	reasonOutOfOrder:            "out_of_order",
	reasonDuplicate:             "duplicate",
	reasonBucketLayoutChanged:   "bucket_layout_changed",
	reasonInvalid:               "invalid",
	reasonRule:                  "rule",
	reasonRejected:              "rejected",
	reasonInconsistentHistogram: "inconsistent_histogram",
}

func (r dropReason) String() string { return dropReasonNames[r] }

// alterReason says how a data point sent was changed to what CloudWatch
// accepts; it is the `reason` attribute of the points_altered counter.
type alterReason uint8

const (
	alterMetricName       alterReason = iota // control characters, invalid UTF-8 or length
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

func (r alterReason) String() string { return alterReasonNames[r] }

// alterCounts counts altered data points by reason.
type alterCounts [numAlterReasons]int

// add counts one data point altered as a says.
func (c *alterCounts) add(a alteration) {
	for r := range c {
		if a&(1<<r) != 0 {
			c[r]++
		}
	}
}

// dropCounts counts dropped data points by reason.
type dropCounts [numDropReasons]int

func (d *dropCounts) add(o *dropCounts) {
	for i := range d {
		d[i] += o[i]
	}
}

func (d *dropCounts) total() int {
	n := 0
	for _, c := range d {
		n += c
	}
	return n
}

// checkValue says why v cannot be sent to CloudWatch, if it cannot.
func checkValue(v float64) (dropReason, bool) {
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
