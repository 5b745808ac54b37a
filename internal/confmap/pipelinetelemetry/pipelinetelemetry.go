// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package pipelinetelemetry is a confmap converter that sends a selection of
// the collector's own telemetry (its queues, and the points it refused,
// dropped or failed to send) with the data, to every store the data goes to,
// so that a loss shows where users already look and not only on the pull
// endpoint on 127.0.0.1.
//
// It adds to a configuration that has a `metrics` pipeline and a pull
// reader in service::telemetry:
//
//   - a pipeline_health receiver (receiver/pipelinehealthreceiver) that
//     reads the pull endpoint every GPUBUILD_PIPELINE_TELEMETRY_INTERVAL
//     and emits the series in Series (its metric_names; without the points
//     about the receiver itself), counters as deltas, gauges as they are, in
//   - a pipeline, metrics/pipeline_health, which ends in
//   - a forward connector into the `metrics` pipeline, so the series take
//     whatever way the data takes (the destinations' fanout, a gateway).
//
// Reading the pull endpoint, rather than a periodic SDK reader exporting to
// a receiver, leaves nothing to flush at shutdown (the reader's last export
// would find its receiver closed and fail the Collector's exit status).
// The resource is the collector's (service.name, service.version,
// service.instance.id): the cloudwatch exporter copies only its
// resource_to_dimensions (not the instance id) and a gateway drops the
// instance id before merging.
//
// GPUBUILD_PIPELINE_TELEMETRY_ENABLED=false leaves the configuration as it
// is; so does GPUBUILD_METRICS_ENABLED=false (nothing is exported then).
package pipelinetelemetry // import "github.com/gpubuild/otelcol-gpubuild/internal/confmap/pipelinetelemetry"

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/confmap"

	"github.com/gpubuild/otelcol-gpubuild/internal/confmap/envflag"
	"github.com/gpubuild/otelcol-gpubuild/internal/confmap/maprewrite"
	"github.com/gpubuild/otelcol-gpubuild/internal/confmap/metricsswitch"
)

// Environment variables read by the converter.
const (
	EnvEnabled  = "GPUBUILD_PIPELINE_TELEMETRY_ENABLED"
	EnvInterval = "GPUBUILD_PIPELINE_TELEMETRY_INTERVAL"
)

// DefaultEnabled is on: the pipeline's health goes with the data unless turned off.
const DefaultEnabled = true

// Component ids the converter adds.
const (
	Receiver  = "pipeline_health"
	Connector = "forward/pipeline_health"
	Pipeline  = "metrics/pipeline_health"

	sourcePipeline  = "metrics"
	defaultInterval = time.Minute
)

// Series are the collector's own metrics that are sent, by their names in
// the collector (upstream names where the Collector has them). Each is
// documented with its dimensions and alarm in docs/operations.md.
var Series = []string{
	"otelcol_exporter_queue_size",
	"otelcol_exporter_queue_capacity",
	"otelcol_exporter_enqueue_failed_metric_points",
	"otelcol_exporter_send_failed_metric_points",
	"otelcol_receiver_refused_metric_points",
	"otelcol_receiver_refused_spans",
	"otelcol_admission_refused_requests",
	"otelcol_scraper_errored_metric_points",
	"otelcol_exporter_cloudwatch_points_dropped",
	"otelcol_exporter_cloudwatch_requests",
	"otelcol_fanout_points_dropped",
	"otelcol_intervalmerge_requests_refused",
	"otelcol_intervalmerge_requests_duplicate",
}

// NewFactory returns the converter factory that ocb wires into the distribution.
func NewFactory() confmap.ConverterFactory { return maprewrite.NewFactory(Apply) }

// Apply adds the pipeline-health receiver, connector and pipeline to a
// resolved configuration. It does not modify cfg.
func Apply(cfg map[string]any, lookupEnv func(string) (string, bool)) (map[string]any, error) {
	enabled, err := envflag.Bool(lookupEnv, EnvEnabled, DefaultEnabled)
	if err != nil {
		return nil, err
	}
	interval, err := readInterval(lookupEnv)
	if err != nil {
		return nil, err
	}
	// metricsswitch reports a bad value of its own variable.
	if metricsOn, mErr := metricsswitch.Enabled(lookupEnv); !enabled || mErr != nil || !metricsOn {
		return cfg, nil
	}
	service := asMap(cfg["service"])
	pipelines := asMap(service["pipelines"])
	source := asMap(pipelines[sourcePipeline])
	endpoint := pullEndpoint(asMap(asMap(service["telemetry"])["metrics"]))
	if source == nil || endpoint == "" {
		return cfg, nil
	}

	out := cloneMap(cfg)
	addComponent(out, "receivers", Receiver, map[string]any{
		"url":                 endpoint,
		"collection_interval": interval.String(),
		"metric_names":        metricNames(),
	})
	addComponent(out, "connectors", Connector, nil)

	newPipelines := cloneMap(pipelines)
	newSource := cloneMap(source)
	newSource["receivers"] = appendNew(asList(source["receivers"]), Connector)
	newPipelines[sourcePipeline] = newSource
	newPipelines[Pipeline] = map[string]any{
		"receivers": []any{Receiver},
		"exporters": []any{Connector},
	}
	newService := cloneMap(service)
	newService["pipelines"] = newPipelines
	out["service"] = newService
	return out, nil
}

// pullEndpoint is the URL of the first Prometheus pull reader of
// service::telemetry::metrics, read on loopback when it listens on every
// address; "" when there is none (or telemetry is off).
func pullEndpoint(metricsTel map[string]any) string {
	if metricsTel["level"] == "none" {
		return ""
	}
	for _, r := range asList(metricsTel["readers"]) {
		prom := asMap(asMap(asMap(asMap(r)["pull"])["exporter"])["prometheus"])
		if prom == nil {
			continue
		}
		host := fmt.Sprint(prom["host"])
		if prom["host"] == nil || host == "" || host == "0.0.0.0" || host == "::" {
			host = "127.0.0.1"
		}
		return "http://" + net.JoinHostPort(host, fmt.Sprint(prom["port"])) + "/metrics"
	}
	return ""
}

// metricNames is Series as the receiver's metric_names. The receiver
// leaves out the points the Collector counts about the receiver itself
// (billed series that say nothing about the data).
func metricNames() []any {
	out := make([]any, len(Series))
	for i, s := range Series {
		out[i] = s
	}
	return out
}

func readInterval(lookupEnv func(string) (string, bool)) (time.Duration, error) {
	v, _ := lookupEnv(EnvInterval)
	if strings.TrimSpace(v) == "" {
		return defaultInterval, nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil || d < time.Second {
		return 0, fmt.Errorf("%s: %q is not a duration of at least 1s (e.g. 60s)", EnvInterval, v)
	}
	return d, nil
}

func addComponent(cfg map[string]any, kind, id string, value any) {
	m := cloneMap(asMap(cfg[kind]))
	m[id] = value
	cfg[kind] = m
}

func appendNew(list []any, v any) []any {
	if slices.Contains(list, v) {
		return list
	}
	return append(slices.Clone(list), v)
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

func cloneMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}
