// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package buildjobconnector

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/gpubuild/otelcol-gpubuild/connector/buildjobconnector/internal/metadata"
	"github.com/gpubuild/otelcol-gpubuild/internal/buildjob/derive"
)

func TestLoadConnectorConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)

	custom := createDefaultConfig().(*Config)
	custom.Dimensions = []string{"build.engine", "build.data_type"}
	custom.JobSpanNames = []string{"build_index"}
	custom.StageSpanNames = []derive.StageSpanName{{SpanName: "s3.download", Stage: "download"}, {SpanName: "cagra.build", Stage: "gpu_build"}}
	custom.JobStatus["CANCELLED_INDEX_BUILD"] = derive.StatusActionCancellation
	custom.JobTimeout = 45 * time.Minute
	custom.MaxActiveJobs = 500
	custom.MetricsFlushInterval = time.Minute
	custom.Temporality = derive.TemporalityCumulative
	custom.APIRequestsFromSpans = false
	custom.JobDurationBuckets = []float64{10, 60, 600, 3600}
	custom.StageDurationBuckets = []float64{1, 10, 100}
	custom.APIDurationBuckets = []float64{0.1, 1}
	stateStorage := component.MustNewIDWithName("file_storage", "state")
	custom.State.Storage = &stateStorage
	custom.State.Journal.Directory = "/var/lib/otelcol-gpubuild/queue"
	custom.State.Journal.Fsync = true
	custom.State.Journal.CheckpointInterval = 30 * time.Second

	tests := []struct {
		id      component.ID
		want    component.Config
		wantErr string
	}{
		{id: component.NewID(metadata.Type), want: createDefaultConfig()},
		{id: component.NewIDWithName(metadata.Type, "custom"), want: custom},
		{id: component.NewIDWithName(metadata.Type, "bad_temporality"), wantErr: `temporality: must be "delta" or "cumulative", got "sometimes"`},
		{id: component.NewIDWithName(metadata.Type, "reserved_dimension"), wantErr: `dimensions[0]: "build.job.id"`},
		{id: component.NewIDWithName(metadata.Type, "bad_status"), wantErr: `job_status[RUNNING_INDEX_BUILD]: must be one of start, success, failure, cancellation, got "begin"`},
		{id: component.NewIDWithName(metadata.Type, "bad_buckets"), wantErr: "job_duration_buckets[1]: bounds must be strictly increasing"},
		{id: component.NewIDWithName(metadata.Type, "bad_timeout"), wantErr: "job_timeout: must be positive"},
		{id: component.NewIDWithName(metadata.Type, "bad_stage_rule"), wantErr: "stage_span_names[0].stage: must not be empty"},
		{id: component.NewIDWithName(metadata.Type, "journal_without_storage"), wantErr: "state.journal.directory: needs state.storage"},
		{id: component.NewIDWithName(metadata.Type, "bad_checkpoint_interval"), wantErr: "state.journal.checkpoint_interval: must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.id.String(), func(t *testing.T) {
			cfg := createDefaultConfig()
			sub, err := cm.Sub(tt.id.String())
			require.NoError(t, err)
			require.NoError(t, sub.Unmarshal(cfg))
			if tt.wantErr != "" {
				err := confmap.Validate(cfg)
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, confmap.Validate(cfg))
			assert.Equal(t, tt.want, cfg)
		})
	}
}

func TestValidateDimensions(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Dimensions = []string{"build.engine", "", "build.engine", "http.route"}
	err := confmap.Validate(cfg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "dimensions[1]: must not be empty")
	assert.Contains(t, err.Error(), `dimensions[2]: "build.engine" is listed twice`)
	assert.Contains(t, err.Error(), `dimensions[3]: "http.route"`)
}

func TestJobStatusEntriesMergeWithDefaults(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	sub, err := cm.Sub(component.NewIDWithName(metadata.Type, "extra_status").String())
	require.NoError(t, err)
	cfg := createDefaultConfig().(*Config)
	require.NoError(t, sub.Unmarshal(cfg))
	assert.Equal(t, map[string]string{
		"RUNNING_INDEX_BUILD":   derive.StatusActionStart,
		"COMPLETED_INDEX_BUILD": derive.StatusActionSuccess,
		"FAILED_INDEX_BUILD":    derive.StatusActionFailure,
		"CANCELLED_INDEX_BUILD": derive.StatusActionCancellation,
	}, cfg.JobStatus)
}
