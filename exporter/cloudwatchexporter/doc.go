// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package cloudwatchexporter sends OpenTelemetry metrics to Amazon CloudWatch
// with PutMetricData: cumulative sums and histograms become exact deltas,
// histograms keep their buckets (so CloudWatch can compute percentiles) and their
// exact count, sum, min and max, and a retry re-sends only what CloudWatch did
// not accept.
//
//go:generate mdatagen metadata.yaml
package cloudwatchexporter // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter"
