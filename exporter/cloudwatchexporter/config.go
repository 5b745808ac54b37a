// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter"

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/send"
	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/translate"
	"github.com/gpubuild/otelcol-gpubuild/internal/cumulative"
	"github.com/gpubuild/otelcol-gpubuild/internal/state"
)

// Output destinations.
const (
	destinationCloudWatch = "cloudwatch"
	destinationStdout     = "stdout"
	destinationFile       = "file"
	destinationAuto       = "auto"
)

// Config is the configuration of the cloudwatch exporter.
type Config struct {
	exporterhelper.TimeoutConfig `mapstructure:",squash"`
	QueueConfig                  configoptional.Optional[exporterhelper.QueueBatchConfig] `mapstructure:"sending_queue"`
	BackOffConfig                configretry.BackOffConfig                                `mapstructure:"retry_on_failure"`

	// ShutdownDrainTimeout is how long Shutdown keeps sending what is queued
	// (with retries) before stopping the queue: with a persistent queue what
	// is left stays on disk for the next start. 0 stops at once.
	ShutdownDrainTimeout time.Duration `mapstructure:"shutdown_drain_timeout"`
	// RequestTimeout bounds one PutMetricData request. A request in flight
	// outlives the export's timeout up to this long, so a slow answer from
	// CloudWatch (which may already have stored the data) is awaited rather
	// than cut off and sent again.
	RequestTimeout time.Duration `mapstructure:"request_timeout"`

	// MaxSeriesPerMetric bounds the billed series (dimension sets) of each
	// metric name; past it, new series are folded into one overflow series.
	// 0: no bound.
	MaxSeriesPerMetric int `mapstructure:"max_series_per_metric"`

	// Namespace is the CloudWatch namespace of every metric. Required.
	Namespace string `mapstructure:"namespace"`
	// Region is the AWS region; empty means the standard chain (AWS_REGION, profile).
	Region string `mapstructure:"region"`
	// Endpoint overrides the CloudWatch endpoint (VPC endpoints, local test servers).
	Endpoint string `mapstructure:"endpoint"`
	// Profile selects a profile of the shared AWS config and credentials files.
	Profile string `mapstructure:"profile"`
	// RoleARN, when set, is assumed with STS using the credentials of the standard chain.
	RoleARN string `mapstructure:"role_arn"`

	// OutputDestination is cloudwatch, stdout, file or auto (CloudWatch when a
	// region and credentials resolve, otherwise a dry run on stdout).
	OutputDestination string `mapstructure:"output_destination"`
	// OutputPath is the file the dry run appends to when OutputDestination is file.
	OutputPath string `mapstructure:"output_path"`

	// ResourceToDimensions lists the resource attributes copied to dimensions.
	ResourceToDimensions []string `mapstructure:"resource_to_dimensions"`
	// StorageResolution is 60 (standard) or 1 (high resolution) for metrics no rule overrides.
	StorageResolution int32 `mapstructure:"storage_resolution"`
	// Metrics are per-metric rules; the first rule whose match fits a metric name applies.
	Metrics []MetricRule `mapstructure:"metrics"`

	// MaxRequestsPerSecond is the ceiling of the adaptive PutMetricData pace;
	// 0 means none (unpaced until CloudWatch throttles).
	MaxRequestsPerSecond float64 `mapstructure:"max_requests_per_second"`
	// MaxConcurrentRequests caps PutMetricData calls in flight for one export.
	MaxConcurrentRequests int `mapstructure:"max_concurrent_requests"`

	// CumulativeState is the cumulative-to-delta state: where it is kept
	// and how much of it. The key `cumulative_state` of earlier releases
	// is read as `state` for one more release (Unmarshal).
	CumulativeState CumulativeStateConfig `mapstructure:"state"`

	// WriteFailureBufferBytes bounds what is held in memory, in order, when
	// the persistent sending queue cannot write to its storage (a full or
	// failing disk); past it data is refused upstream with a retryable
	// error. Measured as the queue's bytes sizer does (serialized OTLP).
	// 0 holds nothing: every failed write is refused at once.
	WriteFailureBufferBytes int64 `mapstructure:"write_failure_buffer_bytes"`
	// WriteReserveDirectory is the persistent queue's directory, where a
	// reserve file of WriteReserveBytes keeps room for the queue to read
	// and delete when the volume fills up; empty: no reserve.
	WriteReserveDirectory string `mapstructure:"write_reserve_directory"`
	// WriteReserveBytes is the reserve file's size.
	WriteReserveBytes int64 `mapstructure:"write_reserve_bytes"`

	// Handoff is the peer gateway that takes what the drain at Shutdown
	// left in the persistent queue (handoff.go); empty endpoint: none.
	Handoff HandoffConfig `mapstructure:"handoff"`

	// legacyStateKey: the configuration set cumulative_state (Unmarshal).
	legacyStateKey bool

	// prevent unkeyed literal initialization
	_ struct{}
}

// MetricRule changes how the metrics whose name it matches are sent.
type MetricRule struct {
	// Match is an exact metric name or a glob (`*`, `?`, `[...]`).
	Match string `mapstructure:"match"`
	// Drop discards the metric.
	Drop bool `mapstructure:"drop"`
	// Rename is the CloudWatch metric name to use instead of the OpenTelemetry name.
	Rename string `mapstructure:"rename"`
	// Unit is a CloudWatch unit (e.g. Seconds, Bytes, Count, None) replacing the one mapped from UCUM.
	Unit string `mapstructure:"unit"`
	// StorageResolution is 1 or 60; 0 keeps the exporter's storage_resolution.
	StorageResolution int32 `mapstructure:"storage_resolution"`
	// IncludeDimensions, when not empty, keeps only these dimension names.
	IncludeDimensions []string `mapstructure:"include_dimensions"`
	// ExcludeDimensions removes these dimension names.
	ExcludeDimensions []string `mapstructure:"exclude_dimensions"`
}

// CumulativeStateConfig bounds the per-series state kept for cumulative-to-delta
// conversion and says where it is saved.
type CumulativeStateConfig struct {
	// TTL forgets a series that has not been seen for this long.
	TTL time.Duration `mapstructure:"ttl"`
	// MaxSeries is the most series remembered; past it a series seen only
	// once is evicted first, then the least recently updated established
	// one (counted, logged), to make room.
	MaxSeries int `mapstructure:"max_series"`
	// MaxAge: the first point of a series never seen before is counted from
	// its start time only when that start is at most this long ago; an older
	// start makes it a baseline (a sidecar added to a long-running service
	// does not send months of counts as one interval). 0 means no limit.
	MaxAge time.Duration `mapstructure:"max_age"`
	// FutureTolerance: a point stamped more than this ahead of the
	// collector's clock is refused for its series (too_new) and never becomes
	// its baseline or last value. 0 turns the check off.
	FutureTolerance time.Duration `mapstructure:"future_tolerance"`
	// Storage and Journal (internal/state): with a storage each series
	// continues after a restart from its last point instead of sending its
	// total again; the journal appends each save and writes the storage
	// once per checkpoint interval, the last state of each series only
	// (every series moves with every export).
	state.Config `mapstructure:",squash"`
}

var _ component.Config = (*Config)(nil)

// Validate checks every field and names the one that is wrong.
func (cfg *Config) Validate() error {
	var errs []error
	if err := validateNamespace(cfg.Namespace); err != nil {
		errs = append(errs, err)
	}
	if cfg.Endpoint != "" {
		u, err := url.Parse(cfg.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("endpoint: %q must be an absolute http or https URL", cfg.Endpoint))
		}
	}
	if cfg.RoleARN != "" && !strings.HasPrefix(cfg.RoleARN, "arn:") {
		errs = append(errs, errors.New("role_arn: must be an ARN (arn:aws:iam::<account>:role/<name>)"))
	}
	switch cfg.OutputDestination {
	case destinationCloudWatch, destinationStdout, destinationAuto:
		if cfg.OutputPath != "" {
			errs = append(errs, fmt.Errorf("output_path: only used with output_destination %q", destinationFile))
		}
	case destinationFile:
		if cfg.OutputPath == "" {
			errs = append(errs, errors.New("output_path: must be set when output_destination is \"file\""))
		}
	default:
		errs = append(errs, fmt.Errorf("output_destination: %q is not one of cloudwatch, stdout, file, auto", cfg.OutputDestination))
	}
	for i, key := range cfg.ResourceToDimensions {
		if strings.TrimSpace(key) == "" {
			errs = append(errs, fmt.Errorf("resource_to_dimensions[%d]: must not be empty", i))
		}
	}
	if cfg.StorageResolution != 1 && cfg.StorageResolution != 60 {
		errs = append(errs, fmt.Errorf("storage_resolution: %d must be 1 or 60", cfg.StorageResolution))
	}
	for i := range cfg.Metrics {
		if err := cfg.Metrics[i].validate(); err != nil {
			errs = append(errs, fmt.Errorf("metrics[%d].%w", i, err))
		}
	}
	if cfg.WriteReserveBytes < 0 {
		errs = append(errs, errors.New("write_reserve_bytes: must not be negative"))
	}
	if cfg.WriteFailureBufferBytes < 0 {
		errs = append(errs, errors.New("write_failure_buffer_bytes: must not be negative (0 holds nothing in memory)"))
	}
	if cfg.MaxRequestsPerSecond < 0 {
		errs = append(errs, errors.New("max_requests_per_second: must not be negative (0 means no ceiling)"))
	}
	if cfg.MaxConcurrentRequests < 1 {
		errs = append(errs, errors.New("max_concurrent_requests: must be at least 1"))
	}
	if cfg.CumulativeState.TTL <= 0 {
		errs = append(errs, errors.New("state.ttl: must be positive"))
	}
	if cfg.CumulativeState.MaxSeries < 1 {
		errs = append(errs, errors.New("state.max_series: must be at least 1"))
	}
	if cfg.CumulativeState.MaxAge < 0 {
		errs = append(errs, errors.New("state.max_age: must not be negative (0 means no ceiling)"))
	}
	if cfg.CumulativeState.FutureTolerance < 0 {
		errs = append(errs, errors.New("state.future_tolerance: must not be negative (0 turns the check off)"))
	}
	errs = append(errs, cfg.CumulativeState.Problems("state")...)
	if cfg.Timeout < 0 {
		errs = append(errs, errors.New("timeout: must not be negative"))
	}
	if cfg.MaxSeriesPerMetric < 0 {
		errs = append(errs, errors.New("max_series_per_metric: must not be negative (0 means no bound)"))
	}
	if cfg.RequestTimeout <= 0 {
		errs = append(errs, errors.New("request_timeout: must be positive"))
	}
	if cfg.ShutdownDrainTimeout < 0 {
		errs = append(errs, errors.New("shutdown_drain_timeout: must not be negative (0 means do not wait)"))
	}
	errs = append(errs, cfg.Handoff.problems()...)
	if q := cfg.QueueConfig.Get(); cfg.Handoff.enabled() && (q == nil || q.StorageID == nil) {
		errs = append(errs, errors.New("handoff.endpoint: needs a persistent sending_queue (sending_queue.storage)"))
	}
	return errors.Join(errs...)
}

func validateNamespace(ns string) error {
	switch {
	case ns == "":
		return errors.New("namespace: must not be empty")
	case len(ns) > translate.MaxNamespaceLen:
		return fmt.Errorf("namespace: longer than %d characters", translate.MaxNamespaceLen)
	case strings.HasPrefix(ns, ":"):
		return errors.New("namespace: must not start with ':'")
	case strings.HasPrefix(ns, "AWS/"):
		return errors.New("namespace: the AWS/ prefix is reserved for AWS services")
	case !isPrintableASCII(ns):
		return errors.New("namespace: must contain only printable ASCII characters")
	}
	return nil
}

func (r *MetricRule) validate() error {
	if r.Match == "" {
		return errors.New("match: must not be empty")
	}
	if _, err := path.Match(r.Match, ""); err != nil {
		return fmt.Errorf("match: %q is not a valid glob: %w", r.Match, err)
	}
	if r.Drop && (r.Rename != "" || r.Unit != "" || r.StorageResolution != 0 ||
		len(r.IncludeDimensions) > 0 || len(r.ExcludeDimensions) > 0) {
		return errors.New("drop: a dropping rule takes no other setting")
	}
	if len(r.Rename) > translate.MaxMetricNameLen {
		return fmt.Errorf("rename: longer than %d characters", translate.MaxMetricNameLen)
	}
	if r.Unit != "" && !isCloudWatchUnit(r.Unit) {
		return fmt.Errorf("unit: %q is not a CloudWatch unit (e.g. Seconds, Milliseconds, Bytes, Percent, Count, None)", r.Unit)
	}
	if r.StorageResolution != 0 && r.StorageResolution != 1 && r.StorageResolution != 60 {
		return fmt.Errorf("storage_resolution: %d must be 1 or 60 (or unset)", r.StorageResolution)
	}
	if len(r.IncludeDimensions) > 0 && len(r.ExcludeDimensions) > 0 {
		return errors.New("include_dimensions: cannot be combined with exclude_dimensions")
	}
	return nil
}

func isCloudWatchUnit(u string) bool {
	for _, v := range types.StandardUnit("").Values() {
		if string(v) == u {
			return true
		}
	}
	return false
}

func isPrintableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// awsSourceOf is where the AWS configuration comes from besides the
// standard chain.
func awsSourceOf(cfg *Config) send.AWSSource {
	return send.AWSSource{Region: cfg.Region, Profile: cfg.Profile, RoleARN: cfg.RoleARN}
}

// translatorConfig is what the translator needs of cfg.
func translatorConfig(cfg *Config) translate.Config {
	tc := translate.Config{ResourceToDimensions: cfg.ResourceToDimensions, StorageResolution: cfg.StorageResolution}
	for _, r := range cfg.Metrics {
		tc.Rules = append(tc.Rules, translate.Rule(r))
	}
	return tc
}

// trackerConfig is the cumulative tracker's configuration.
func (c CumulativeStateConfig) trackerConfig() cumulative.Config {
	return cumulative.Config{TTL: c.TTL, MaxSeries: c.MaxSeries, MaxAge: c.MaxAge, FutureTolerance: c.FutureTolerance}
}

// legacyStateKey is where an earlier release read the cumulative state's
// settings.
const legacyStateKey = "cumulative_state"

// Unmarshal reads the configuration, taking the settings of an earlier
// release's cumulative_state key as state (Start warns about it).
func (cfg *Config) Unmarshal(conf *confmap.Conf) error {
	if conf.IsSet(legacyStateKey) {
		if conf.IsSet("state") {
			return errors.New(legacyStateKey + ": set state instead (both are set)")
		}
		m := conf.ToStringMap()
		m["state"] = m[legacyStateKey]
		delete(m, legacyStateKey)
		conf = confmap.NewFromStringMap(m)
		cfg.legacyStateKey = true
	}
	// plain has Config's fields without this method.
	type plain Config
	return conf.Unmarshal((*plain)(cfg))
}
