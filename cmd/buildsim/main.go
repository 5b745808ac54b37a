// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Command buildsim simulates the GPU vector-index build service's telemetry
// (job and stage spans, job status log records, API server spans, SDK
// metrics) over OTLP with the OpenTelemetry Go SDK, and prints the ground
// truth of what it sent as JSON.
//
//	buildsim -endpoint 127.0.0.1:4317 -jobs 1000 -rate 200 -failure-ratio 0.1 > truth.json
//
// Exit status: 0 when everything was acknowledged, 1 when the run failed or
// some export was refused for good (the summary still tells what arrived),
// 2 for bad flags.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.opentelemetry.io/otel"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/buildsim"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	cfg, out, err := parseFlags(args, stderr)
	if err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		fmt.Fprintln(stderr, "buildsim:", err)
		return 2
	}
	// The OTLP exporters report partial successes and dropped data here.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { fmt.Fprintln(stderr, "buildsim: otel:", err) }))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logf := func(format string, args ...any) { fmt.Fprintf(stderr, format+"\n", args...) }
	summary, runErr := buildsim.Run(ctx, cfg, buildsim.WithLogf(logf))
	code := 0
	if runErr != nil {
		fmt.Fprintln(stderr, "buildsim:", runErr)
		code = 1
	}
	if summary == nil {
		return 1
	}
	if e := summary.Exports; !e.Complete() {
		fmt.Fprintf(stderr, "buildsim: refused for good: %d span and %d log export requests; %d final metric exports\n",
			e.Spans.RequestsFailed, e.LogRecords.RequestsFailed, e.MetricFinalExportsFailed)
		code = 1
	}
	if err := writeSummary(summary, out, stdout); err != nil {
		fmt.Fprintln(stderr, "buildsim:", err)
		return 1
	}
	return code
}

// writeSummary writes the JSON summary to the file out, or to stdout when
// out is empty. A summary file that did not reach the disk is an error.
func writeSummary(summary *buildsim.Summary, out string, stdout io.Writer) error {
	if out == "" {
		return encodeSummary(stdout, summary)
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	return errors.Join(encodeSummary(f, summary), f.Close())
}

func encodeSummary(w io.Writer, summary *buildsim.Summary) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(summary)
}

// parseFlags turns the command line into a run configuration and the path
// of the summary file ("" = stdout).
func parseFlags(args []string, stderr io.Writer) (buildsim.Config, string, error) {
	cfg := buildsim.DefaultConfig()
	fs := flag.NewFlagSet("buildsim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.Protocol, "protocol", cfg.Protocol, "OTLP protocol: grpc or http")
	fs.StringVar(&cfg.Endpoint, "endpoint", cfg.Endpoint, "collector OTLP endpoint host:port (4317 for grpc, 4318 for http)")
	fs.StringVar(&cfg.CAFile, "ca-file", "", "PEM CA to trust; turns TLS on")
	fs.StringVar(&cfg.ServerName, "server-name", "", "TLS server name to verify (default: the endpoint's host)")
	fs.BoolVar(&cfg.InsecureSkipVerify, "insecure-skip-verify", false, "TLS without verifying the server certificate")
	fs.StringVar(&cfg.BearerToken, "bearer-token", "", "send Authorization: Bearer <token> (default $BUILDSIM_BEARER_TOKEN; prefer the variable, argv is visible to other users)")
	headers := fs.String("headers", "", "extra headers, k=v,k2=v2")
	fs.StringVar(&cfg.ServiceName, "service-name", cfg.ServiceName, "resource service.name")
	fs.StringVar(&cfg.InstanceID, "instance-id", cfg.InstanceID, "resource service.instance.id")
	fs.IntVar(&cfg.Jobs, "jobs", cfg.Jobs, "build runs to emit")
	fs.Float64Var(&cfg.Rate, "rate", cfg.Rate, "build runs per second of real time (0: as fast as acknowledged)")
	fs.DurationVar(&cfg.Tick, "tick", cfg.Tick, "emit and export what is due this often")
	fs.Float64Var(&cfg.FailureRatio, "failure-ratio", cfg.FailureRatio, "fraction of runs that fail in a stage")
	fs.Float64Var(&cfg.CancelRatio, "cancel-ratio", cfg.CancelRatio, "fraction of runs cancelled mid-stage (no end log record)")
	stages := fs.String("stages", formatStages(cfg.StageMeans), "stages in order with their mean simulated durations, name=duration,...")
	fs.DurationVar(&cfg.StageMax, "stage-max", cfg.StageMax, "cap on one stage's simulated duration")
	fs.DurationVar(&cfg.QueueWaitMean, "queue-wait", cfg.QueueWaitMean, "mean simulated wait before the first stage")
	fs.IntVar(&cfg.StatusPolls, "status-polls", cfg.StatusPolls, "GET /_status/{job_id} calls per job")
	fs.Float64Var(&cfg.API4xxRatio, "api-4xx-ratio", cfg.API4xxRatio, "fraction of API calls answered 4xx")
	fs.Float64Var(&cfg.API5xxRatio, "api-5xx-ratio", cfg.API5xxRatio, "fraction of API calls answered 5xx")
	fs.DurationVar(&cfg.APILatencyMean, "api-latency", cfg.APILatencyMean, "mean simulated API latency")
	engines := fs.String("engines", strings.Join(cfg.Engines, ","), "build.engine values")
	dataTypes := fs.String("data-types", strings.Join(cfg.DataTypes, ","), "build.data_type values")
	fs.IntVar(&cfg.Tenants, "tenants", cfg.Tenants, "tenants submitting jobs")
	fs.Int64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the run's plan")
	fs.DurationVar(&cfg.StartLead, "start-lead", 0, "send each run's RUNNING record this long (real time) before its end")
	fs.IntVar(&cfg.RestartAfter, "restart-after", 0, "restart the service's SDK (new start times, counters from zero) after this many jobs; 0: never")
	signals := fs.String("signals", "job_spans,stage_spans,job_logs,api_spans,metrics,api_metrics",
		"what to send: job_spans, stage_spans, job_logs, api_spans, metrics (the service's SDK metrics), api_metrics (http.server.request.duration; implies metrics)")
	fs.DurationVar(&cfg.MetricInterval, "metric-interval", cfg.MetricInterval, "SDK metric export interval")
	fs.IntVar(&cfg.GPUs, "gpus", cfg.GPUs, "GPUs the utilization gauge reports")
	fs.IntVar(&cfg.MetricSeries, "metric-series", 0, "extra series per SDK instrument, updated every tick (metric load)")
	fs.DurationVar(&cfg.ExportTimeout, "export-timeout", cfg.ExportTimeout, "timeout of one OTLP export attempt")
	fs.DurationVar(&cfg.RetryInitial, "retry-initial", cfg.RetryInitial, "first retry delay of a retryable refusal")
	fs.DurationVar(&cfg.RetryMaxElapsed, "retry-max-elapsed", cfg.RetryMaxElapsed, "give a refused export up after this long (0: no retries)")
	fs.IntVar(&cfg.MaxBatch, "max-batch", cfg.MaxBatch, "spans or log records per export request at most")
	fs.IntVar(&cfg.MetricMaxBatch, "metric-max-batch", 0, "metric points per export request at most (0: each collection in one request, the SDK default)")
	fs.BoolVar(&cfg.StopOnExportError, "stop-on-error", false, "stop at the first export refused for good")
	out := fs.String("summary", "", "write the JSON summary to this file instead of stdout")
	if err := fs.Parse(args); err != nil {
		return cfg, "", err
	}
	if fs.NArg() > 0 {
		return cfg, "", fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if cfg.BearerToken == "" {
		cfg.BearerToken = os.Getenv("BUILDSIM_BEARER_TOKEN")
	}
	var err error
	if cfg.StageMeans, err = parseStages(*stages); err != nil {
		return cfg, "", err
	}
	if cfg.Headers, err = parseHeaders(*headers); err != nil {
		return cfg, "", err
	}
	cfg.Engines = splitList(*engines)
	cfg.DataTypes = splitList(*dataTypes)
	if err := applySignals(&cfg, *signals); err != nil {
		return cfg, "", err
	}
	return cfg, *out, cfg.Validate()
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func formatStages(stages []buildsim.StageMean) string {
	parts := make([]string, len(stages))
	for i, s := range stages {
		parts[i] = s.Stage + "=" + s.Mean.String()
	}
	return strings.Join(parts, ",")
}

func parseStages(s string) ([]buildsim.StageMean, error) {
	var out []buildsim.StageMean
	for _, part := range splitList(s) {
		name, dur, ok := strings.Cut(part, "=")
		if !ok {
			return nil, fmt.Errorf("stages: %q is not name=duration", part)
		}
		d, err := time.ParseDuration(dur)
		if err != nil {
			return nil, fmt.Errorf("stages: %q: %w", part, err)
		}
		out = append(out, buildsim.StageMean{Stage: name, Mean: d})
	}
	return out, nil
}

func parseHeaders(s string) (map[string]string, error) {
	h := map[string]string{}
	for _, part := range splitList(s) {
		k, v, ok := strings.Cut(part, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("headers: %q is not key=value", part)
		}
		h[k] = v
	}
	return h, nil
}

func applySignals(cfg *buildsim.Config, s string) error {
	cfg.JobSpans, cfg.StageSpans, cfg.JobLogs, cfg.APISpans, cfg.Metrics, cfg.APIMetrics = false, false, false, false, false, false
	for _, sig := range splitList(s) {
		switch sig {
		case "job_spans":
			cfg.JobSpans = true
		case "stage_spans":
			cfg.StageSpans = true
		case "job_logs":
			cfg.JobLogs = true
		case "api_spans":
			cfg.APISpans = true
		case "metrics":
			cfg.Metrics = true
		case "api_metrics":
			cfg.Metrics, cfg.APIMetrics = true, true
		default:
			return fmt.Errorf("signals: unknown %q (job_spans, stage_spans, job_logs, api_spans, metrics, api_metrics)", sig)
		}
	}
	return nil
}
