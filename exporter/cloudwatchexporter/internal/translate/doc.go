// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package translate turns delta and gauge pdata into CloudWatch datums
// within CloudWatch's limits (names, dimensions, units, histograms as
// values and counts), folds series past max_series_per_metric into an
// overflow series, packs datums into PutMetricData requests and writes
// them in the forms they are sent or printed: the SDK's CBOR body, the dry
// run's JSON, the SDK's input. It does no I/O; sending is the exporter's.
package translate // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/translate"
