// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package buildsim

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"
)

// point is a copy of one exported metric data point.
type point struct {
	incarnation int
	name, unit  string
	attrs       map[string]string
	start, time time.Time
	value       float64 // sum or gauge value; histogram sum
	count       uint64  // histogram count
	min, max    float64
}

func testConfig() Config {
	cfg := DefaultConfig()
	cfg.Rate = 0
	cfg.Jobs = 200
	cfg.FailureRatio = 0.2
	cfg.CancelRatio = 0.05
	cfg.MetricInterval = time.Hour // only the final export at shutdown
	return cfg
}

func TestRunTruthMatchesWhatWasExported(t *testing.T) {
	rec := &recorder{}
	cfg := testConfig()
	s, err := Run(context.Background(), cfg, WithExporterFactory(rec.factory))
	require.NoError(t, err)

	derived := rec.derive(t)
	assert.Equal(t, derived, s.Generated, "generated truth vs the contract applied to the exported telemetry")
	assert.Equal(t, derived, s.Acknowledged, "everything was acknowledged")
	assert.Equal(t, cfg.Jobs, s.JobsEmitted)

	var total int64
	for _, n := range s.Generated.JobsByResult {
		total += n
	}
	assert.EqualValues(t, cfg.Jobs, total, "each job counted once although its span and its records both arrived")
	assert.Positive(t, s.Generated.JobsByResult[ResultFailure])
	assert.Positive(t, s.Generated.JobsByResult[ResultCancellation])
	assert.Zero(t, s.Generated.DanglingStarts)

	// One accepted POST per job, StatusPolls GETs per job.
	post2xx := Match(s.Generated.APIRequests, map[string]string{AttrRoute: RouteBuild, AttrStatusClass: "2xx"})
	assert.EqualValues(t, cfg.Jobs, post2xx.Count)
	gets := Match(s.Generated.APIRequests, map[string]string{AttrRoute: RouteStatus, AttrMethod: "GET"})
	assert.EqualValues(t, cfg.Jobs*cfg.StatusPolls, gets.Count)
	assert.Positive(t, Match(s.Generated.APIRequests, map[string]string{AttrStatusClass: "4xx"}).Count)
	assert.Positive(t, Match(s.Generated.APIRequests, map[string]string{AttrStatusClass: "5xx"}).Count)

	// Spans and records that went out: counted by the exports' own stats.
	assert.EqualValues(t, len(rec.spans), s.Exports.Spans.Items)
	assert.EqualValues(t, len(rec.logs), s.Exports.LogRecords.Items)
	assert.Zero(t, s.Exports.Spans.RequestsFailed+s.Exports.LogRecords.RequestsFailed)
}

func TestRunHandCountedTotals(t *testing.T) {
	rec := &recorder{}
	cfg := testConfig()
	cfg.Jobs = 50
	cfg.FailureRatio, cfg.CancelRatio, cfg.API4xxRatio, cfg.API5xxRatio = 0, 0, 0, 0
	cfg.StatusPolls = 2
	s, err := Run(context.Background(), cfg, WithExporterFactory(rec.factory))
	require.NoError(t, err)

	assert.Equal(t, map[string]int64{ResultSuccess: 50}, s.Generated.JobsByResult)
	for _, st := range DefaultStages() {
		assert.EqualValues(t, 50, Match(s.Generated.StageRuns, map[string]string{AttrStage: st.Stage, AttrResult: ResultSuccess}).Count, st.Stage)
	}
	assert.Len(t, s.Generated.StageRuns, 4*len(cfg.Engines)*len(cfg.DataTypes))
	assert.EqualValues(t, 50, Match(s.Generated.APIRequests, map[string]string{AttrRoute: RouteBuild}).Count)
	assert.EqualValues(t, 100, Match(s.Generated.APIRequests, map[string]string{AttrRoute: RouteStatus}).Count)
	// 50 jobs: 4 stages + 1 job span + 3 API spans each; 2 records each.
	assert.Len(t, rec.spans, 50*8)
	assert.Len(t, rec.logs, 50*2)

	// A job lasts from its creation to the end of its last stage; it is the
	// queue wait plus the stages, so the job duration sum exceeds the sum of
	// stage durations of those jobs.
	jobs := Match(s.Generated.Jobs, nil)
	stages := Match(s.Generated.StageRuns, nil)
	assert.Greater(t, jobs.Duration.Sum, stages.Duration.Sum)
	assert.EqualValues(t, 50, jobs.Duration.Count)
}

func TestRunAcknowledgedFollowsRefusals(t *testing.T) {
	t.Run("spans refused, records accepted: runs still counted from the records", func(t *testing.T) {
		rec := &recorder{failSpans: func(int) bool { return true }}
		s, err := Run(context.Background(), testConfig(), WithExporterFactory(rec.factory))
		require.NoError(t, err)
		assert.Empty(t, rec.spans)
		assert.Equal(t, rec.derive(t), s.Acknowledged)
		assert.Empty(t, s.Acknowledged.StageRuns)
		assert.Empty(t, s.Acknowledged.APIRequests)
		// Cancelled runs have no end record, so only their start arrived.
		assert.Equal(t, s.Generated.JobsByResult[ResultCancellation], s.Acknowledged.DanglingStarts)
		assert.Equal(t, s.Generated.JobsByResult[ResultSuccess], s.Acknowledged.JobsByResult[ResultSuccess])
		assert.Positive(t, s.Exports.Spans.RequestsFailed)
	})
	t.Run("every other span export refused", func(t *testing.T) {
		rec := &recorder{failSpans: func(n int) bool { return n%2 == 0 }, failLogs: func(n int) bool { return n%3 == 0 }}
		cfg := testConfig()
		cfg.MaxBatch = 100
		s, err := Run(context.Background(), cfg, WithExporterFactory(rec.factory))
		require.NoError(t, err)
		assert.Equal(t, rec.derive(t), s.Acknowledged)
		assert.NotEqual(t, s.Generated, s.Acknowledged)
		assert.EqualValues(t, len(rec.spans), s.Exports.Spans.Items-s.Exports.Spans.ItemsFailed)
	})
	t.Run("a failed final metric export is a loss", func(t *testing.T) {
		rec := &recorder{failMetrics: true}
		cfg := testConfig()
		cfg.RestartAfter = 50
		s, err := Run(context.Background(), cfg, WithExporterFactory(rec.factory))
		require.ErrorContains(t, err, "refused", "the final shutdown reports the failed export")
		assert.Equal(t, 2, s.Exports.MetricFinalExportsFailed, "one per incarnation")
		assert.False(t, s.Exports.Complete())
	})
	t.Run("StopOnExportError ends the run", func(t *testing.T) {
		rec := &recorder{failLogs: func(int) bool { return true }}
		cfg := testConfig()
		cfg.StopOnExportError = true
		cfg.MaxBatch = 100 // about ten jobs per round
		s, err := Run(context.Background(), cfg, WithExporterFactory(rec.factory))
		require.Error(t, err)
		assert.Less(t, s.JobsEmitted, cfg.Jobs)
	})
}

func TestRunRestartStartsNewSDK(t *testing.T) {
	rec := &recorder{}
	cfg := testConfig()
	cfg.RestartAfter = 80
	s, err := Run(context.Background(), cfg, WithExporterFactory(rec.factory))
	require.NoError(t, err)
	assert.Equal(t, 1, s.Restarts)
	assert.Equal(t, 2, rec.factories)
	assert.Equal(t, rec.derive(t), s.Acknowledged)

	// Each incarnation exported its cumulative counter once at shutdown,
	// from its own start time; the two final values add up to the total.
	var sum float64
	starts := map[int]time.Time{}
	for _, p := range rec.points {
		if p.name != CounterName {
			continue
		}
		sum += p.value
		if prev, ok := starts[p.incarnation]; ok {
			assert.Equal(t, prev, p.start, "one start time per incarnation")
		}
		starts[p.incarnation] = p.start
	}
	require.Len(t, starts, 2)
	assert.True(t, starts[2].After(starts[1]), "the restarted SDK has a later start time")
	assert.EqualValues(t, s.SDKMetrics.Counter.Total, sum)
}

func TestRunSDKMetricsTruth(t *testing.T) {
	rec := &recorder{}
	cfg := testConfig()
	cfg.MetricSeries = 5
	s, err := Run(context.Background(), cfg, WithExporterFactory(rec.factory))
	require.NoError(t, err)

	// With one incarnation, the final cumulative points hold every value.
	var counter, histSum, httpSum float64
	var histCount, httpCount uint64
	hmin, hmax := 0.0, 0.0
	httpMin, httpMax := 0.0, 0.0
	gaugeSeries := map[string]bool{}
	for _, p := range rec.points {
		switch p.name {
		case CounterName:
			assert.Equal(t, CounterUnit, p.unit)
			counter += p.value
		case HistogramName:
			assert.Equal(t, HistogramUnit, p.unit)
			if histCount == 0 || p.min < hmin {
				hmin = p.min
			}
			if histCount == 0 || p.max > hmax {
				hmax = p.max
			}
			histSum += p.value
			histCount += p.count
		case HTTPDurationName:
			assert.Equal(t, HTTPDurationUnit, p.unit)
			if httpCount == 0 || p.min < httpMin {
				httpMin = p.min
			}
			if httpCount == 0 || p.max > httpMax {
				httpMax = p.max
			}
			httpSum += p.value
			httpCount += p.count
			assert.NotEmpty(t, p.attrs[AttrRoute])
			assert.NotEmpty(t, p.attrs[AttrStatusCode])
		case GaugeName:
			assert.Equal(t, GaugeUnit, p.unit)
			assert.Contains(t, GaugeValues(), p.value)
			gaugeSeries[p.attrs[AttrGPUIndex]+"/"+p.attrs[AttrMetricSeries]] = true
		}
	}
	h := s.SDKMetrics.Histogram
	assert.EqualValues(t, s.SDKMetrics.Counter.Total, counter)
	assert.EqualValues(t, h.Count, histCount)
	assert.Equal(t, h.Sum, histSum)
	assert.Equal(t, h.Min, hmin)
	assert.Equal(t, h.Max, hmax)
	assert.Len(t, gaugeSeries, cfg.GPUs+cfg.MetricSeries)
	// The HTTP server histogram holds every API call: the same calls and
	// durations as the API spans.
	api := Match(s.Generated.APIRequests, nil)
	hd := s.SDKMetrics.HTTPServerDuration
	assert.EqualValues(t, api.Count, httpCount)
	assert.Equal(t, api.Duration.Sum, httpSum)
	assert.Equal(t, api.Duration.Min, httpMin)
	assert.Equal(t, api.Duration.Max, httpMax)
	assert.Equal(t, HistogramTruth{Name: HTTPDurationName, Unit: HTTPDurationUnit, Count: api.Count, Sum: httpSum, Min: httpMin, Max: httpMax}, hd)
	assert.Equal(t, cfg.GPUs+cfg.MetricSeries, s.SDKMetrics.Gauge.Series)
	// Successful jobs recorded one sample each; load series one per round.
	assert.GreaterOrEqual(t, h.Count, s.Generated.JobsByResult[ResultSuccess]+int64(cfg.MetricSeries))
	assert.Positive(t, s.Exports.MetricPoints.Items)
}

func TestRunIsReproducible(t *testing.T) {
	run := func(seed int64) *Summary {
		cfg := testConfig()
		cfg.Seed = seed
		s, err := Run(context.Background(), cfg, WithExporterFactory((&recorder{}).factory))
		require.NoError(t, err)
		return s
	}
	a, b, c := run(7), run(7), run(8)
	assert.Equal(t, a.Generated, b.Generated)
	assert.Equal(t, a.SDKMetrics, b.SDKMetrics)
	assert.NotEqual(t, a.Generated, c.Generated)
}

func TestRunRate(t *testing.T) {
	cfg := testConfig()
	cfg.Jobs, cfg.Rate, cfg.Tick = 20, 100, 10*time.Millisecond
	s, err := Run(context.Background(), cfg, WithExporterFactory((&recorder{}).factory))
	require.NoError(t, err)
	// The 20th job is due 0.2 s after the start, not before.
	assert.GreaterOrEqual(t, s.Elapsed, 0.2)
	assert.Equal(t, 20, s.JobsEmitted)
}

func TestRunCancelled(t *testing.T) {
	cfg := testConfig()
	cfg.Jobs, cfg.Rate = 1000, 10
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	rec := &recorder{}
	s, err := Run(ctx, cfg, WithExporterFactory(rec.factory))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, s.JobsEmitted, cfg.Jobs)
	// What was emitted before the cancellation was still flushed.
	assert.Equal(t, rec.derive(t), s.Acknowledged)
	assert.Equal(t, s.Generated, s.Acknowledged)
}

func TestRunOnlyLogs(t *testing.T) {
	rec := &recorder{}
	cfg := testConfig()
	cfg.JobSpans, cfg.StageSpans, cfg.APISpans, cfg.APIMetrics = false, false, false, false
	s, err := Run(context.Background(), cfg, WithExporterFactory(rec.factory))
	require.NoError(t, err)
	assert.Empty(t, rec.spans)
	assert.Equal(t, rec.derive(t), s.Generated)
	assert.Zero(t, s.Generated.JobsByResult[ResultCancellation], "a cancelled job writes no end record")
	assert.Equal(t, s.Generated.DanglingStarts, int64(len(rec.logs))-2*(s.Generated.JobsByResult[ResultSuccess]+s.Generated.JobsByResult[ResultFailure]))
}

func TestRunStartLead(t *testing.T) {
	rec := &recorder{}
	cfg := testConfig()
	cfg.Jobs, cfg.Rate, cfg.Tick = 30, 100, 20*time.Millisecond
	cfg.StartLead = 200 * time.Millisecond
	cfg.RestartAfter = 15
	s, err := Run(context.Background(), cfg, WithExporterFactory(rec.factory))
	require.NoError(t, err)
	assert.Equal(t, rec.derive(t), s.Generated)
	assert.Equal(t, s.Generated, s.Acknowledged)
	assert.GreaterOrEqual(t, s.Elapsed, 0.2+0.29, "the last run ends a lead after it starts")
	// Most runs' RUNNING records left in an earlier export than their end.
	earlier := 0
	for key, call := range rec.logCall {
		id, status, _ := strings.Cut(key, "/")
		if status != StatusRunning {
			continue
		}
		for _, end := range []string{StatusCompleted, StatusFailed} {
			if c, ok := rec.logCall[id+"/"+end]; ok && c > call {
				earlier++
			}
		}
	}
	assert.Greater(t, earlier, cfg.Jobs/2)
	// Every span still has its job span as parent or is a root: the API
	// spans are roots of their own traces.
	for _, sp := range rec.spans {
		if sp.SpanKind() == trace.SpanKindServer {
			assert.False(t, sp.Parent().IsValid(), "API span %s has a parent", sp.Name())
		}
	}
}

func TestRunSplitsLargeMetricCollections(t *testing.T) {
	rec := &recorder{}
	cfg := testConfig()
	cfg.Jobs = 20
	cfg.MetricSeries = 1500 // 4500 points and more per collection
	cfg.MetricMaxBatch = 1000
	s, err := Run(context.Background(), cfg, WithExporterFactory(rec.factory))
	require.NoError(t, err)
	assert.LessOrEqual(t, rec.maxPointsPerExport(), 1000)
	assert.GreaterOrEqual(t, s.Exports.MetricPoints.Requests, 5, "one collection of 4500+ points in requests of 1000")
	var counter float64
	for _, p := range rec.points {
		if p.name == CounterName {
			counter += p.value
		}
	}
	assert.EqualValues(t, s.SDKMetrics.Counter.Total, counter)
	assert.True(t, s.Exports.Complete())
}
