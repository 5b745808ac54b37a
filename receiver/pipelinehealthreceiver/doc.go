// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:generate mdatagen metadata.yaml

// Package pipelinehealthreceiver reads the collector's own metrics from its
// Prometheus pull endpoint (service::telemetry) every collection_interval
// and emits them as OpenTelemetry metrics: counters as deltas since the
// previous read (a series seen for the first time counts from zero, so the
// first loss of a loss counter is its whole value), gauges as they are,
// with the collector's resource from target_info. Reading the endpoint,
// rather than exporting from the SDK to a receiver, leaves nothing to flush
// at shutdown. internal/confmap/pipelinetelemetry wires it in.
package pipelinehealthreceiver // import "github.com/gpubuild/otelcol-gpubuild/receiver/pipelinehealthreceiver"
