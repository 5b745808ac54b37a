// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package pipelinetelemetry is a confmap converter that sends a selection of
// the collector's own telemetry (its queues, and the points it refused,
// dropped or failed to send) with the data, to every store the data goes to,
// so that a loss shows where users already look and not only on the pull
// endpoint on 127.0.0.1.
//
// It adds to a configuration that has a `metrics` pipeline:
//
//   - a periodic reader beside the pull reader in service::telemetry, which
//     exports delta temporality over OTLP/HTTP to
//   - a receiver on 127.0.0.1, otlp/pipeline_health, in
//   - a pipeline, metrics/pipeline_health, whose filter processor keeps only
//     the series in Series, and which ends in
//   - a forward connector into the `metrics` pipeline, so the series take
//     whatever way the data takes (the destinations' fanout, a gateway).
//
// Delta temporality: a counter with no increment in an interval sends
// nothing, so a healthy sidecar sends only its gauges and its successes;
// each destination converts as it does for the data. The resource is the
// collector's (service.name, service.version, service.instance.id): the
// cloudwatch exporter copies only its resource_to_dimensions (not the
// instance id) and a gateway drops the instance id before merging.
//
// GPUBUILD_PIPELINE_TELEMETRY_ENABLED=true turns it on (DefaultEnabled says
// why it is off); off, or with GPUBUILD_METRICS_ENABLED=false, the
// configuration is left as it is.
package pipelinetelemetry // import "github.com/gpubuild/otelcol-gpubuild/internal/confmap/pipelinetelemetry"

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/confmap"

	"github.com/gpubuild/otelcol-gpubuild/internal/confmap/envflag"
	"github.com/gpubuild/otelcol-gpubuild/internal/confmap/metricsswitch"
)

// Environment variables read by the converter.
const (
	EnvEnabled  = "GPUBUILD_PIPELINE_TELEMETRY_ENABLED"
	EnvInterval = "GPUBUILD_PIPELINE_TELEMETRY_INTERVAL"
	EnvPort     = "GPUBUILD_PIPELINE_TELEMETRY_PORT"
)

// DefaultEnabled is off: at shutdown the pipelines stop before the
// telemetry, so the periodic reader's last export finds its receiver
// closed, and the Collector then exits with status 1 after SIGTERM
// ("failed to shutdown meter provider: failed to upload metrics"). On by
// default needs a receiver that answers until the process exits, or one
// that reads the pull endpoint instead (docs/operations.md).
const DefaultEnabled = false

// Component ids the converter adds.
const (
	Receiver  = "otlp/pipeline_health"
	Filter    = "filter/pipeline_health"
	Connector = "forward/pipeline_health"
	Pipeline  = "metrics/pipeline_health"

	sourcePipeline  = "metrics"
	defaultInterval = time.Minute
	maxTimeout      = 2 * time.Second
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
	"otelcol_scraper_errored_metric_points",
	"otelcol_exporter_cloudwatch_points_dropped",
	"otelcol_exporter_cloudwatch_requests",
	"otelcol_fanout_points_dropped",
	"otelcol_intervalmerge_requests_refused",
	"otelcol_intervalmerge_requests_duplicate",
}

// NewFactory returns the converter factory that ocb wires into the distribution.
func NewFactory() confmap.ConverterFactory {
	return confmap.NewConverterFactory(func(confmap.ConverterSettings) confmap.Converter {
		return converter{lookupEnv: os.LookupEnv, freePort: freeLoopbackPort}
	})
}

type converter struct {
	lookupEnv func(string) (string, bool)
	freePort  func() (int, error)
}

func (c converter) Convert(_ context.Context, conf *confmap.Conf) error {
	out, err := Apply(conf.ToStringMap(), c.lookupEnv, c.freePort)
	if err != nil {
		return err
	}
	*conf = *confmap.NewFromStringMap(out)
	return nil
}

// Apply adds the pipeline-health reader, receiver, filter and pipeline to
// a resolved configuration. It does not modify cfg. freePort picks the
// receiver's port when GPUBUILD_PIPELINE_TELEMETRY_PORT is unset.
func Apply(cfg map[string]any, lookupEnv func(string) (string, bool), freePort func() (int, error)) (map[string]any, error) {
	enabled, err := envflag.Bool(lookupEnv, EnvEnabled, DefaultEnabled)
	if err != nil {
		return nil, err
	}
	interval, err := readInterval(lookupEnv)
	if err != nil {
		return nil, err
	}
	port, err := readPort(lookupEnv)
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
	telemetry := asMap(service["telemetry"])
	metricsTel := asMap(telemetry["metrics"])
	if source == nil || metricsTel["level"] == "none" {
		return cfg, nil
	}
	if port == 0 {
		if port, err = freePort(); err != nil {
			return nil, fmt.Errorf("%s: no free loopback port for the pipeline-health receiver (set %s): %w", EnvEnabled, EnvPort, err)
		}
	}
	endpoint := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))

	out := cloneMap(cfg)
	addComponent(out, "receivers", Receiver, map[string]any{
		"protocols": map[string]any{"http": map[string]any{"endpoint": endpoint}},
	})
	addComponent(out, "processors", Filter, FilterConfig())
	addComponent(out, "connectors", Connector, nil)

	newPipelines := cloneMap(pipelines)
	newSource := cloneMap(source)
	newSource["receivers"] = appendNew(asList(source["receivers"]), Connector)
	newPipelines[sourcePipeline] = newSource
	newPipelines[Pipeline] = map[string]any{
		"receivers":  []any{Receiver},
		"processors": []any{Filter},
		"exporters":  []any{Connector},
	}

	timeout := min(interval, maxTimeout)
	reader := map[string]any{"periodic": map[string]any{
		"interval": interval.Milliseconds(),
		"timeout":  timeout.Milliseconds(),
		"exporter": map[string]any{"otlp": map[string]any{
			"protocol":               "http/protobuf",
			"endpoint":               "http://" + endpoint + "/v1/metrics",
			"temporality_preference": "delta",
		}},
	}}
	newMetricsTel := cloneMap(metricsTel)
	newMetricsTel["readers"] = append(slices.Clone(asList(metricsTel["readers"])), reader)
	newTelemetry := cloneMap(telemetry)
	newTelemetry["metrics"] = newMetricsTel

	newService := cloneMap(service)
	newService["pipelines"] = newPipelines
	newService["telemetry"] = newTelemetry
	out["service"] = newService
	return out, nil
}

// FilterConfig is the filter processor's configuration: every metric not
// in Series is dropped, and so are the points the pipeline-health receiver
// counts about itself (a billed series that says nothing about the data).
func FilterConfig() map[string]any {
	return map[string]any{
		"error_mode": "propagate",
		"metrics": map[string]any{
			"metric":    []any{`not IsMatch(name, "^(` + strings.Join(Series, "|") + `)$")`},
			"datapoint": []any{`attributes["receiver"] == "` + Receiver + `"`},
		},
	}
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

// readPort is 0 when the variable is unset: a free port is picked.
func readPort(lookupEnv func(string) (string, bool)) (int, error) {
	v, _ := lookupEnv(EnvPort)
	if strings.TrimSpace(v) == "" {
		return 0, nil
	}
	p, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || p < 1 || p > 65535 {
		return 0, fmt.Errorf("%s: %q is not a port (1-65535)", EnvPort, v)
	}
	return p, nil
}

// freeLoopbackPort asks the kernel for a free port on 127.0.0.1. Nothing
// outside the process needs to know it, and a fixed default would collide
// between collectors on one host (tests, a gateway beside a sidecar).
func freeLoopbackPort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	return port, ln.Close()
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
