// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package buildsim

import (
	"errors"
	"fmt"
	"time"
)

// Protocols the simulator can export with.
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http"
)

// Config is one simulator run. The zero value is not usable; start from
// [DefaultConfig].
type Config struct {
	// Protocol is "grpc" (OTLP/gRPC) or "http" (OTLP/HTTP protobuf).
	Protocol string
	// Endpoint is host:port of the collector's OTLP receiver for Protocol.
	Endpoint string

	// TLS: when CAFile is set the exporters use TLS and trust that CA;
	// InsecureSkipVerify turns verification off (self-signed test servers).
	CAFile             string
	ServerName         string
	InsecureSkipVerify bool
	// BearerToken is sent as "Authorization: Bearer <token>" when not empty.
	BearerToken string
	// Headers are extra request headers (or gRPC metadata).
	Headers map[string]string

	// ServiceName is the resource's service.name; InstanceID its
	// service.instance.id (kept across a simulated restart, as a restarted
	// pod keeps its name).
	ServiceName string
	InstanceID  string

	// GPUIDs, when not empty, names the GPU each run used (hw.id, the
	// GPU's NVML UUID) on its job span, status records and stage spans:
	// run n used GPUIDs[n % len(GPUIDs)]. Empty (the default) names none.
	GPUIDs []string
	// ProcessPID, when > 0, is the resource's process.pid: the process
	// whose GPU memory the sidecar reads as each run's peak. 0 (the
	// default) sets none.
	ProcessPID int

	// Jobs is how many build runs to emit.
	Jobs int
	// Rate is build runs per second of real time; 0 means as fast as the
	// collector acknowledges.
	Rate float64
	// Tick is how often the simulator emits what is due and exports it.
	Tick time.Duration
	// FailureRatio and CancelRatio are the fractions of runs that end as
	// failure (a stage fails) or cancellation (the job is deleted mid-stage).
	FailureRatio float64
	CancelRatio  float64
	// StageMeans is the mean simulated duration of each stage, in the order
	// the stages run. Durations are drawn log-normally around the mean and
	// capped at StageMax.
	StageMeans []StageMean
	StageMax   time.Duration
	// QueueWaitMean is the mean time between the job's creation and its first
	// stage.
	QueueWaitMean time.Duration

	// StatusPolls is how many GET /_status/{job_id} calls a client makes per
	// job. API4xxRatio and API5xxRatio are the fractions of API calls that
	// fail with a 4xx or 5xx; a failed POST /_build is retried (at most
	// three attempts, the last one succeeds).
	StatusPolls int
	API4xxRatio float64
	API5xxRatio float64
	// APILatencyMean is the mean simulated server latency of an API call.
	APILatencyMean time.Duration

	// Engines and DataTypes are the values of build.engine and
	// build.data_type (the dimensions the collector copies to derived
	// metrics), drawn uniformly.
	Engines   []string
	DataTypes []string
	// Tenants is how many tenants submit jobs (tenant attribute on the SDK
	// counter).
	Tenants int

	// Seed makes the plan reproducible.
	Seed int64

	// StartLead sends each run's RUNNING record (and opens its job span)
	// this long before the rest of the run, as a real service logs the start
	// long before the run ends; 0 sends a run all at once. The simulated
	// timestamps do not change.
	StartLead time.Duration

	// RestartAfter, when > 0, shuts every SDK provider down after that many
	// jobs and starts new ones, as a restarted service process would: new
	// start times, cumulative counters from zero.
	RestartAfter int

	// Signals to send. JobSpans and JobLogs are the two sources of the same
	// job runs; the collector must count each run once either way.
	JobSpans   bool
	StageSpans bool
	JobLogs    bool
	APISpans   bool
	Metrics    bool
	// APIMetrics records every API call in the http.server.request.duration
	// histogram as OpenTelemetry HTTP instrumentation does (needs Metrics).
	// A collector derives api.requests from the spans or from this
	// histogram, never both.
	APIMetrics bool

	// MetricInterval is the SDK's periodic export interval.
	MetricInterval time.Duration
	// GPUs is how many GPUs the utilization gauge reports.
	GPUs int
	// MetricSeries adds this many extra series to each SDK instrument (label
	// sim.series), all updated every tick: load without extra jobs. With the
	// three instruments, points per second = 3*(MetricSeries+...)/interval.
	MetricSeries int

	// ExportTimeout bounds one OTLP export attempt; RetryMaxElapsed bounds
	// the OTLP exporter's retries of retryable refusals (0 turns retries
	// off). An export with its retries takes at most their sum.
	ExportTimeout   time.Duration
	RetryInitial    time.Duration
	RetryMaxElapsed time.Duration
	// MaxBatch caps the spans or log records in one export request.
	MaxBatch int
	// MetricMaxBatch caps the data points of one metric export request; 0
	// sends each collection whole, as the SDKs do by default. Large loads
	// need it to stay under the receiver's 4 MiB message limit.
	MetricMaxBatch int
	// StopOnExportError ends the run at the first export that fails for
	// good (after retries) instead of carrying on and counting it.
	StopOnExportError bool
}

// StageMean names a stage and its mean simulated duration.
type StageMean struct {
	Stage string
	Mean  time.Duration
}

// DefaultConfig is a small, realistic run against a local collector.
func DefaultConfig() Config {
	return Config{
		Protocol:       ProtocolGRPC,
		Endpoint:       "127.0.0.1:4317",
		ServiceName:    "vector-index-build",
		InstanceID:     "buildsim-0",
		Jobs:           100,
		Rate:           50,
		Tick:           100 * time.Millisecond,
		FailureRatio:   0.1,
		StageMeans:     DefaultStages(),
		StageMax:       5 * time.Minute,
		QueueWaitMean:  2 * time.Second,
		StatusPolls:    3,
		API4xxRatio:    0.05,
		API5xxRatio:    0.02,
		APILatencyMean: 40 * time.Millisecond,
		Engines:        []string{"cagra", "ivf_pq"},
		DataTypes:      []string{"float32", "float16"},
		Tenants:        8,
		Seed:           1,
		JobSpans:       true,
		StageSpans:     true,
		JobLogs:        true,
		APISpans:       true,
		Metrics:        true,
		APIMetrics:     true,
		MetricInterval: time.Second,
		GPUs:           2,
		ExportTimeout:  10 * time.Second,
		RetryInitial:   200 * time.Millisecond,
		// Long enough to ride out a memory_limiter refusal, short enough
		// that a test does not hang on a dead collector.
		RetryMaxElapsed: 30 * time.Second,
		MaxBatch:        2048,
	}
}

// DefaultStages are the build service's stages with typical durations.
func DefaultStages() []StageMean {
	return []StageMean{
		{Stage: "download", Mean: 20 * time.Second},
		{Stage: "gpu_build", Mean: 2 * time.Minute},
		{Stage: "gpu_to_cpu", Mean: 10 * time.Second},
		{Stage: "upload", Mean: 15 * time.Second},
	}
}

// Validate reports the first invalid field by name.
func (c Config) Validate() error {
	var errs []error
	if c.Protocol != ProtocolGRPC && c.Protocol != ProtocolHTTP {
		errs = append(errs, fmt.Errorf("protocol: must be %q or %q, got %q", ProtocolGRPC, ProtocolHTTP, c.Protocol))
	}
	if c.Endpoint == "" {
		errs = append(errs, errors.New("endpoint: must not be empty"))
	}
	if c.Jobs < 0 {
		errs = append(errs, errors.New("jobs: must not be negative"))
	}
	if c.Rate < 0 {
		errs = append(errs, errors.New("rate: must not be negative"))
	}
	if c.Tick <= 0 {
		errs = append(errs, errors.New("tick: must be positive"))
	}
	for _, r := range []struct {
		name  string
		value float64
	}{{"failure_ratio", c.FailureRatio}, {"cancel_ratio", c.CancelRatio}, {"api_4xx_ratio", c.API4xxRatio}, {"api_5xx_ratio", c.API5xxRatio}} {
		if r.value < 0 || r.value > 1 {
			errs = append(errs, fmt.Errorf("%s: must be within [0, 1], got %v", r.name, r.value))
		}
	}
	if c.FailureRatio+c.CancelRatio > 1 {
		errs = append(errs, errors.New("failure_ratio: failure_ratio + cancel_ratio must not exceed 1"))
	}
	if c.API4xxRatio+c.API5xxRatio > 1 {
		errs = append(errs, errors.New("api_4xx_ratio: api_4xx_ratio + api_5xx_ratio must not exceed 1"))
	}
	if len(c.StageMeans) == 0 {
		errs = append(errs, errors.New("stages: must name at least one stage"))
	}
	for _, s := range c.StageMeans {
		if s.Stage == "" || s.Mean < DurationQuantum {
			errs = append(errs, fmt.Errorf("stages: %q needs a name and a mean of at least %v", s.Stage, DurationQuantum))
		}
	}
	if c.StageMax < DurationQuantum {
		errs = append(errs, fmt.Errorf("stage_max: must be at least %v", DurationQuantum))
	}
	if c.StatusPolls < 0 {
		errs = append(errs, errors.New("status_polls: must not be negative"))
	}
	if c.APILatencyMean < DurationQuantum {
		errs = append(errs, fmt.Errorf("api_latency: must be at least %v", DurationQuantum))
	}
	if len(c.Engines) == 0 || len(c.DataTypes) == 0 {
		errs = append(errs, errors.New("engines: engines and data_types must not be empty"))
	}
	if c.Tenants <= 0 {
		errs = append(errs, errors.New("tenants: must be positive"))
	}
	if c.StartLead < 0 {
		errs = append(errs, errors.New("start_lead: must not be negative"))
	}
	if c.RestartAfter < 0 {
		errs = append(errs, errors.New("restart_after: must not be negative"))
	}
	if c.Metrics && c.MetricInterval <= 0 {
		errs = append(errs, errors.New("metric_interval: must be positive"))
	}
	if c.GPUs < 0 || c.MetricSeries < 0 {
		errs = append(errs, errors.New("gpus: gpus and metric_series must not be negative"))
	}
	if c.ExportTimeout <= 0 {
		errs = append(errs, errors.New("export_timeout: must be positive"))
	}
	if c.RetryMaxElapsed < 0 {
		errs = append(errs, errors.New("retry_max_elapsed: must not be negative"))
	}
	if c.MaxBatch <= 0 {
		errs = append(errs, errors.New("max_batch: must be positive"))
	}
	if c.MetricMaxBatch < 0 {
		errs = append(errs, errors.New("metric_max_batch: must not be negative"))
	}
	if c.ServiceName == "" {
		errs = append(errs, errors.New("service_name: must not be empty"))
	}
	return errors.Join(errs...)
}
