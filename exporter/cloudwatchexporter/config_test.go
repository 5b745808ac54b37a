// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/metadata"
	"github.com/gpubuild/otelcol-gpubuild/internal/state"
	"github.com/gpubuild/otelcol-gpubuild/internal/state/journal"
)

func loadConfig(t *testing.T, name string) *Config {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	cfg := NewFactory().CreateDefaultConfig()
	sub, err := cm.Sub(component.NewIDWithName(metadata.Type, name).String())
	require.NoError(t, err)
	require.NoError(t, sub.Unmarshal(cfg))
	return cfg.(*Config)
}

func TestLoadConfigDefaults(t *testing.T) {
	cfg := loadConfig(t, "")
	require.NoError(t, confmap.Validate(cfg))

	assert.Equal(t, "GPUBuild/Default", cfg.Namespace)
	assert.Equal(t, "cloudwatch", cfg.OutputDestination)
	assert.Equal(t, int32(60), cfg.StorageResolution)
	assert.Equal(t, 4, cfg.MaxConcurrentRequests)
	assert.Zero(t, cfg.MaxRequestsPerSecond)
	assert.Equal(t, 15*time.Second, cfg.Timeout)
	assert.Equal(t, 20*time.Second, cfg.ShutdownDrainTimeout, "Shutdown sends what is queued for up to 20 s")
	assert.Equal(t, CumulativeStateConfig{
		TTL: 30 * time.Minute, MaxSeries: 50_000, MaxAge: 24 * time.Hour, FutureTolerance: 5 * time.Minute,
		Config: state.Config{Journal: journal.Config{CheckpointInterval: 10 * time.Second}},
	}, cfg.CumulativeState)
	assert.Empty(t, cfg.CumulativeState.Journal.Directory, "no journal unless its directory is named")
	assert.Nil(t, cfg.CumulativeState.Storage, "the state is in memory unless a storage is named")
	assert.Contains(t, cfg.ResourceToDimensions, "service.name")
	assert.Contains(t, cfg.ResourceToDimensions, "hw.id")
	assert.NotContains(t, cfg.ResourceToDimensions, "service.instance.id")
	assert.True(t, cfg.QueueConfig.HasValue(), "the sending queue is on by default")
	assert.True(t, cfg.BackOffConfig.Enabled, "retries are on by default")
}

func TestLoadConfigFull(t *testing.T) {
	cfg := loadConfig(t, "full")
	require.NoError(t, confmap.Validate(cfg))

	assert.Equal(t, "eu-west-1", cfg.Region)
	assert.Equal(t, "https://monitoring.eu-west-1.amazonaws.com", cfg.Endpoint)
	assert.Equal(t, "build", cfg.Profile)
	assert.Equal(t, "arn:aws:iam::123456789012:role/metrics-writer", cfg.RoleARN)
	assert.Equal(t, []string{"service.name", "gpu.uuid"}, cfg.ResourceToDimensions)
	assert.Equal(t, 50.0, cfg.MaxRequestsPerSecond)
	assert.Equal(t, 8, cfg.MaxConcurrentRequests)
	assert.Equal(t, 20*time.Second, cfg.Timeout)
	assert.Equal(t, 25*time.Second, cfg.ShutdownDrainTimeout)
	stateStorage := component.MustNewIDWithName("file_storage", "state")
	assert.Equal(t, CumulativeStateConfig{
		TTL: time.Hour, MaxSeries: 1000, MaxAge: 2 * time.Hour, FutureTolerance: time.Minute,
		Config: state.Config{Storage: &stateStorage, Journal: journal.Config{Directory: "/var/lib/otelcol/state", Fsync: true, CheckpointInterval: 5 * time.Second}},
	}, cfg.CumulativeState)
	assert.Equal(t, time.Second, cfg.BackOffConfig.InitialInterval)
	assert.Equal(t, 10*time.Minute, cfg.BackOffConfig.MaxElapsedTime)

	queue := cfg.QueueConfig.Get()
	require.NotNil(t, queue)
	assert.Equal(t, 2, queue.NumConsumers)
	assert.Equal(t, int64(500), queue.QueueSize)
	require.NotNil(t, queue.StorageID)
	assert.Equal(t, "file_storage", queue.StorageID.String())

	assert.Equal(t, []MetricRule{
		{Match: "gpu.utilization", StorageResolution: 1, Unit: "Percent"},
		{Match: "indexbuild.stage.*", Rename: "StageDuration", IncludeDimensions: []string{"service.name", "stage"}},
		{Match: "process.*", ExcludeDimensions: []string{"process.pid"}},
		{Match: "debug.*", Drop: true},
	}, cfg.Metrics)
}

func TestLoadConfigDryRunFile(t *testing.T) {
	cfg := loadConfig(t, "dryrun_file")
	require.NoError(t, confmap.Validate(cfg))
	assert.Equal(t, "file", cfg.OutputDestination)
	assert.Equal(t, "/tmp/cloudwatch-dryrun.jsonl", cfg.OutputPath)
}

func TestValidateNamesTheField(t *testing.T) {
	tests := []struct {
		name    string
		wantErr []string
	}{
		{name: "no_namespace", wantErr: []string{"namespace: must not be empty"}},
		{name: "file_without_path", wantErr: []string{"output_path: must be set when output_destination is \"file\""}},
		{name: "bad_everything", wantErr: []string{
			"namespace: the AWS/ prefix is reserved",
			"endpoint: \"not a url\" must be an absolute http or https URL",
			"role_arn: must be an ARN",
			"output_destination: \"kinesis\" is not one of cloudwatch, stdout, file, auto",
			"resource_to_dimensions[1]: must not be empty",
			"storage_resolution: 5 must be 1 or 60",
			"metrics[0].match: \"[unclosed\" is not a valid glob",
			"metrics[1].drop: a dropping rule takes no other setting",
			"metrics[2].unit: \"Nanoseconds\" is not a CloudWatch unit",
			"metrics[3].storage_resolution: 30 must be 1 or 60",
			"metrics[4].include_dimensions: cannot be combined with exclude_dimensions",
			"metrics[5].match: must not be empty",
			"max_requests_per_second: must not be negative",
			"max_concurrent_requests: must be at least 1",
			"state.ttl: must be positive",
			"state.max_series: must be at least 1",
			"state.max_age: must not be negative",
			"state.future_tolerance: must not be negative",
			"state.journal.directory: needs state.storage",
			"state.journal.checkpoint_interval: must be positive",
			"request_timeout: must be positive",
			"shutdown_drain_timeout: must not be negative",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := confmap.Validate(loadConfig(t, tt.name))
			require.Error(t, err)
			for _, want := range tt.wantErr {
				assert.ErrorContains(t, err, want)
			}
		})
	}
}

func TestValidateNamespace(t *testing.T) {
	for ns, want := range map[string]string{
		"":                              "namespace: must not be empty",
		":leading":                      "namespace: must not start with ':'",
		"AWS/GPU":                       "namespace: the AWS/ prefix is reserved",
		"GPU\tBuild":                    "namespace: must contain only printable ASCII",
		"GPUBuild/Test":                 "",
		string(make([]byte, 256)):       "namespace: longer than 255",
		"Custom/" + "x" + "/With Space": "",
	} {
		err := validateNamespace(ns)
		if want == "" {
			assert.NoError(t, err, ns)
		} else {
			assert.ErrorContains(t, err, want, ns)
		}
	}
}

func TestValidateTimeout(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Namespace = "X"
	cfg.TimeoutConfig = exporterhelper.TimeoutConfig{Timeout: -time.Second}
	assert.ErrorContains(t, cfg.Validate(), "timeout: must not be negative")
}

// The cumulative_state key of an earlier release is still read, as state,
// and Start says under which key it belongs now.
func TestLegacyCumulativeStateKeyIsReadAsState(t *testing.T) {
	cfg := loadConfig(t, "legacy")
	require.NoError(t, confmap.Validate(cfg))
	assert.Equal(t, 1000, cfg.CumulativeState.MaxSeries)
	require.NotNil(t, cfg.CumulativeState.Storage)
	assert.Equal(t, "file_storage/state", cfg.CumulativeState.Storage.String())
	assert.True(t, cfg.legacyStateKey)

	both := confmap.NewFromStringMap(map[string]any{"state": map[string]any{"max_series": 1}, "cumulative_state": map[string]any{"max_series": 2}})
	err := both.Unmarshal(NewFactory().CreateDefaultConfig())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cumulative_state: set state instead")

	core, logs := observer.New(zap.WarnLevel)
	set := exportertest.NewNopSettings(metadata.Type)
	set.Logger = zap.New(core)
	cfg.CumulativeState.Storage = nil
	cfg.OutputDestination = destinationStdout
	exp, err := NewFactory().CreateMetrics(context.Background(), set, cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, exp.Shutdown(context.Background()))
	require.Len(t, logs.FilterMessageSnippet("rename it to state").All(), 1)
	inMemory := logs.FilterMessageSnippet("in memory only").All()
	require.Len(t, inMemory, 1)
	assert.Contains(t, inMemory[0].Message, "state.storage")
}
