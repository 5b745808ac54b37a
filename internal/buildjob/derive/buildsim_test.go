// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derive

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/buildsim"
)

// TestAgainstBuildSimulatorTruth runs the build-service simulator (the OTel
// Go SDK with its OTLP/HTTP exporters) against an OTLP sink, replays what
// arrived into the connector's deriver, and compares the derived metrics
// with the simulator's own ground truth, series by series.
func TestAgainstBuildSimulatorTruth(t *testing.T) {
	tests := []struct {
		name string
		tune func(*buildsim.Config)
		// redeliver replays every batch twice, as an exporter retrying
		// acknowledged batches would.
		redeliver bool
		// flushEachBatch flushes (cumulative) after every batch with the
		// default job_timeout, so a run's start and end meet across flushes.
		flushEachBatch bool
	}{
		{name: "spans and status records", tune: func(*buildsim.Config) {}},
		{name: "status records only", tune: func(c *buildsim.Config) { c.JobSpans = false }},
		{name: "job spans only", tune: func(c *buildsim.Config) { c.JobLogs = false }},
		{name: "every batch delivered twice", tune: func(*buildsim.Config) {}, redeliver: true},
		{name: "flushed after every batch", tune: func(*buildsim.Config) {}, flushEachBatch: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sink := newOTLPSink(t)
			u, err := url.Parse(sink.srv.URL)
			require.NoError(t, err)
			simCfg := buildsim.DefaultConfig()
			simCfg.Protocol = buildsim.ProtocolHTTP
			simCfg.Endpoint = u.Host
			simCfg.Jobs = 240
			simCfg.Rate = 0
			simCfg.Seed = 7
			simCfg.FailureRatio = 0.2
			simCfg.CancelRatio = 0.1
			simCfg.RestartAfter = 120
			simCfg.MaxBatch = 64 // a run's records and spans spread over several batches
			simCfg.Metrics = false
			tt.tune(&simCfg)
			summary, err := buildsim.Run(context.Background(), simCfg)
			require.NoError(t, err)
			truth := summary.Acknowledged
			require.NotEmpty(t, truth.Jobs)
			t.Logf("truth: jobs by result %v, dangling starts %d, %d stage series, %d API series",
				truth.JobsByResult, truth.DanglingStarts, len(truth.StageRuns), len(truth.APIRequests))

			cfg := testConfig()
			cfg.Dimensions = []string{"build.engine", "build.data_type"}
			if tt.flushEachBatch {
				cfg.Temporality = TemporalityCumulative
			} else {
				// Runs whose end never comes (a cancelled job has no end
				// record) time out at the final flush.
				cfg.JobTimeout = time.Nanosecond
			}
			d := newConnectorDeriver(cfg, time.Now())
			deliveries := 1
			if tt.redeliver {
				deliveries = 2
			}
			for _, batch := range sink.takeAll() {
				for range deliveries {
					switch b := batch.(type) {
					case ptrace.Traces:
						d.consumeTraces(b, time.Now())
					case plog.Logs:
						d.consumeLogs(b, time.Now())
					}
				}
				if tt.flushEachBatch {
					d.flush(time.Now(), false)
				}
			}
			ps := points(d.flush(time.Now(), true))

			for _, want := range truth.Jobs {
				got := matching(ps, metricBuildJobs, want.Attributes)
				require.Len(t, got, 1, "build.jobs%v", want.Attributes)
				assert.Equal(t, want.Count, got[0].value, "build.jobs%v", want.Attributes)
				assertDuration(t, ps, metricBuildJobDuration, want)
			}
			assert.Equal(t, truth.DanglingStarts, total(ps, metricBuildJobs, attrs("build.result", "timeout")))
			var jobs int64
			for _, n := range truth.JobsByResult {
				jobs += n
			}
			assert.Equal(t, jobs+truth.DanglingStarts, total(ps, metricBuildJobs, nil), dump(ps))

			for _, want := range truth.StageRuns {
				got := matching(ps, metricBuildStageRuns, want.Attributes)
				require.Len(t, got, 1, "build.stage.runs%v", want.Attributes)
				assert.Equal(t, want.Count, got[0].value)
				assertDuration(t, ps, metricBuildStageDuration, want)
			}
			assert.Equal(t, int64(len(matching(ps, metricBuildStageRuns, nil))), int64(len(truth.StageRuns)))

			// API request spans are not deduplicated (see README): a
			// redelivered batch counts its requests again.
			for _, want := range truth.APIRequests {
				got := matching(ps, metricAPIRequests, want.Attributes)
				require.Len(t, got, 1, "api.requests%v", want.Attributes)
				assert.Equal(t, want.Count*int64(deliveries), got[0].value)
			}
		})
	}
}

func assertDuration(t *testing.T, ps []point, metric string, want buildsim.Series) {
	t.Helper()
	got := matching(ps, metric, want.Attributes)
	if want.Duration.Count == 0 {
		assert.Empty(t, got, "%s%v", metric, want.Attributes)
		return
	}
	require.Len(t, got, 1, "%s%v", metric, want.Attributes)
	assert.Equal(t, uint64(want.Duration.Count), got[0].count, "%s%v", metric, want.Attributes)
	assert.Equal(t, want.Duration.Sum, got[0].sum, "%s%v", metric, want.Attributes)
	assert.Equal(t, want.Duration.Min, got[0].min, "%s%v", metric, want.Attributes)
	assert.Equal(t, want.Duration.Max, got[0].max, "%s%v", metric, want.Attributes)
}
