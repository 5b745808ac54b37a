// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derive

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// Temporality values accepted by the temporality setting.
const (
	TemporalityDelta      = "delta"
	TemporalityCumulative = "cumulative"
)

// Job status actions: what a job status value means for a run.
const (
	StatusActionStart        = "start"
	StatusActionSuccess      = "success"
	StatusActionFailure      = "failure"
	StatusActionCancellation = "cancellation"
)

// OutputConfig holds the settings shared by the connector and the processor:
// which attributes become dimensions and how the derived metrics are emitted.
type OutputConfig struct {
	// Dimensions lists attribute keys copied to every derived data point. Each
	// key is looked up on the span, log record or data point first, then on
	// its resource. Keep this list short: each value multiplies the series.
	Dimensions []string `mapstructure:"dimensions"`

	// MetricsFlushInterval is how often derived metrics are emitted.
	MetricsFlushInterval time.Duration `mapstructure:"metrics_flush_interval"`

	// Temporality of the derived sums and histograms: delta or cumulative.
	Temporality string `mapstructure:"temporality"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// StageSpanName maps spans with a given name to a build stage, for services
// that cannot set the build.stage attribute.
type StageSpanName struct {
	// SpanName is matched exactly against the span name.
	SpanName string `mapstructure:"span_name"`
	// Stage is the build.stage value given to matching spans.
	Stage string `mapstructure:"stage"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// JobConfig holds the connector's rules: which spans and log records are
// job runs, stages and API requests, and how long runs are remembered.
type JobConfig struct {
	// JobSpanNames lists span names treated as job spans even without the
	// build.stage attribute (matched exactly).
	JobSpanNames []string `mapstructure:"job_span_names"`

	// StageSpanNames maps span names to build stages.
	StageSpanNames []StageSpanName `mapstructure:"stage_span_names"`

	// JobStatus maps values of the build.job.status log attribute to an
	// action: start, success, failure or cancellation. Values not listed are ignored.
	JobStatus map[string]string `mapstructure:"job_status"`

	// JobTimeout is how long a run may stay active before it is counted as
	// build.result=timeout. Ended runs are remembered this long to recognize
	// duplicates and late ends.
	JobTimeout time.Duration `mapstructure:"job_timeout"`

	// MaxActiveJobs bounds the number of runs kept in state, and separately
	// the number of ended runs remembered for deduplication.
	MaxActiveJobs int `mapstructure:"max_active_jobs"`

	// APIRequestsFromSpans derives api.requests and api.request.duration from
	// SERVER spans. Turn it off when the buildjob processor already derives
	// api.requests from the service's HTTP server histograms.
	APIRequestsFromSpans bool `mapstructure:"api_requests_from_spans"`

	// JobDurationBuckets are the explicit bounds, in seconds, of build.job.duration.
	JobDurationBuckets []float64 `mapstructure:"job_duration_buckets"`

	// StageDurationBuckets are the explicit bounds, in seconds, of build.stage.duration.
	StageDurationBuckets []float64 `mapstructure:"stage_duration_buckets"`

	// APIDurationBuckets are the explicit bounds, in seconds, of api.request.duration.
	APIDurationBuckets []float64 `mapstructure:"api_duration_buckets"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// CumulativeConfig sets the rules for the first and future points of the
// service's cumulative histograms (see internal/cumulative).
type CumulativeConfig struct {
	// MaxAge: the first point of a series never seen is counted from its
	// start time when that start is at most this old; an older start makes
	// it a baseline, so that a sidecar added to a long-running service does
	// not report months of requests in one minute.
	MaxAge time.Duration `mapstructure:"max_age"`
	// FutureTolerance: a point stamped more than this ahead of the
	// collector's clock is refused for its series (counted, warned).
	FutureTolerance time.Duration `mapstructure:"future_tolerance"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// DefaultCumulativeConfig is internal/cumulative's defaults.
func DefaultCumulativeConfig() CumulativeConfig {
	return CumulativeConfig{MaxAge: 24 * time.Hour, FutureTolerance: 5 * time.Minute}
}

// Problems checks the cumulative settings, each error naming its field.
func (cfg *CumulativeConfig) Problems() []error {
	var errs []error
	if cfg.MaxAge < 0 {
		errs = append(errs, errors.New("cumulative.max_age: must not be negative (0: no limit)"))
	}
	if cfg.FutureTolerance < 0 {
		errs = append(errs, errors.New("cumulative.future_tolerance: must not be negative (0: no check)"))
	}
	return errs
}

// Builds take from seconds to hours.
var defaultJobDurationBuckets = []float64{1, 5, 10, 30, 60, 120, 300, 600, 900, 1200, 1800, 2700, 3600, 7200, 14400}

// Stages take from well under a second (small uploads) to an hour (GPU build).
var defaultStageDurationBuckets = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600}

// The bounds the HTTP semantic conventions advise for http.server.request.duration.
var defaultAPIDurationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

// DefaultOutputConfig returns the output settings both components start from.
func DefaultOutputConfig() OutputConfig {
	return OutputConfig{
		Dimensions:           []string{},
		MetricsFlushInterval: 10 * time.Second,
		Temporality:          TemporalityDelta,
	}
}

// DefaultJobConfig returns the connector's default rules: the build
// service contract's status values, a 30 minute job timeout.
func DefaultJobConfig() JobConfig {
	return JobConfig{
		JobSpanNames:   []string{},
		StageSpanNames: []StageSpanName{},
		JobStatus: map[string]string{
			"RUNNING_INDEX_BUILD":   StatusActionStart,
			"COMPLETED_INDEX_BUILD": StatusActionSuccess,
			"FAILED_INDEX_BUILD":    StatusActionFailure,
		},
		JobTimeout:           30 * time.Minute,
		MaxActiveJobs:        10000,
		APIRequestsFromSpans: true,
		JobDurationBuckets:   append([]float64(nil), defaultJobDurationBuckets...),
		StageDurationBuckets: append([]float64(nil), defaultStageDurationBuckets...),
		APIDurationBuckets:   append([]float64(nil), defaultAPIDurationBuckets...),
	}
}

// reservedAttributes are set by the component itself; a dimension must not
// override them. build.job.id is here because a job id per series would make
// cardinality unbounded.
var reservedAttributes = map[string]bool{
	attrBuildResult:      true,
	attrBuildStage:       true,
	attrHTTPRoute:        true,
	attrHTTPMethod:       true,
	attrHTTPStatusClass:  true,
	attrBuildJobID:       true,
	attrBuildJobStatus:   true,
	attrBuildJobResult:   true,
	attrBuildStageResult: true,
}

// Problems checks the shared output settings, each error naming its field.
// It is not named Validate so that confmap.Validate does not report its
// errors a second time under the embedded struct's name.
func (cfg *OutputConfig) Problems() []error {
	var errs []error
	seen := make(map[string]bool, len(cfg.Dimensions))
	for i, d := range cfg.Dimensions {
		switch {
		case d == "":
			errs = append(errs, fmt.Errorf("dimensions[%d]: must not be empty", i))
		case reservedAttributes[d]:
			errs = append(errs, fmt.Errorf("dimensions[%d]: %q is set by the component or would make cardinality unbounded", i, d))
		case seen[d]:
			errs = append(errs, fmt.Errorf("dimensions[%d]: %q is listed twice", i, d))
		}
		seen[d] = true
	}
	if cfg.MetricsFlushInterval <= 0 {
		errs = append(errs, errors.New("metrics_flush_interval: must be positive"))
	}
	if cfg.Temporality != TemporalityDelta && cfg.Temporality != TemporalityCumulative {
		errs = append(errs, fmt.Errorf("temporality: must be %q or %q, got %q", TemporalityDelta, TemporalityCumulative, cfg.Temporality))
	}
	return errs
}

// Problems checks the connector's rules, each error naming its field (not
// named Validate for the reason given on OutputConfig.Problems).
func (cfg *JobConfig) Problems() []error {
	var errs []error
	for i, name := range cfg.JobSpanNames {
		if name == "" {
			errs = append(errs, fmt.Errorf("job_span_names[%d]: must not be empty", i))
		}
	}
	for i, rule := range cfg.StageSpanNames {
		if rule.SpanName == "" {
			errs = append(errs, fmt.Errorf("stage_span_names[%d].span_name: must not be empty", i))
		}
		if rule.Stage == "" {
			errs = append(errs, fmt.Errorf("stage_span_names[%d].stage: must not be empty", i))
		}
	}
	startValues := 0
	for status, action := range cfg.JobStatus {
		switch action {
		case StatusActionStart:
			startValues++
		case StatusActionSuccess, StatusActionFailure, StatusActionCancellation:
		default:
			errs = append(errs, fmt.Errorf("job_status[%s]: must be one of start, success, failure, cancellation, got %q", status, action))
		}
		if status == "" {
			errs = append(errs, errors.New("job_status: status value must not be empty"))
		}
	}
	if len(cfg.JobStatus) > 0 && startValues == 0 {
		errs = append(errs, errors.New("job_status: at least one status must map to start"))
	}
	if cfg.JobTimeout <= 0 {
		errs = append(errs, errors.New("job_timeout: must be positive"))
	}
	if cfg.MaxActiveJobs <= 0 {
		errs = append(errs, errors.New("max_active_jobs: must be positive"))
	}
	errs = append(errs,
		validateBuckets("job_duration_buckets", cfg.JobDurationBuckets),
		validateBuckets("stage_duration_buckets", cfg.StageDurationBuckets),
		validateBuckets("api_duration_buckets", cfg.APIDurationBuckets),
	)
	return slices.DeleteFunc(errs, func(err error) bool { return err == nil })
}

func validateBuckets(field string, bounds []float64) error {
	for i, b := range bounds {
		if math.IsNaN(b) || math.IsInf(b, 0) {
			return fmt.Errorf("%s[%d]: must be a finite number", field, i)
		}
		if i > 0 && b <= bounds[i-1] {
			return fmt.Errorf("%s[%d]: bounds must be strictly increasing", field, i)
		}
	}
	return nil
}
