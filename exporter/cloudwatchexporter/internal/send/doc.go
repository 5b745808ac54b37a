// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package send is the exporter's wire: the putters that send one
// PutMetricData request (the AWS SDK client with the bodies written here,
// the dry run, output_destination auto and its credentials lookup), the
// classification of CloudWatch's answers, and the record of answered
// requests that keeps a restarted process from sending one again. What to
// send and what to retry is the exporter's (push.go, settle.go).
package send // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/send"
