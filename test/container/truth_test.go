package container

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/buildsim"
	"github.com/gpubuild/otelcol-gpubuild/internal/cloudwatchtest"
	"github.com/gpubuild/otelcol-gpubuild/test/internal/binarytest"
)

// sim runs a small build service (buildsim: job, stage and API spans, job
// status logs, the SDK's own metrics) against the sidecar in the container
// and requires that the sidecar acknowledged everything.
func (w *world) sim(service string, protocol string, jobs int, seed int64) *buildsim.Summary {
	t := w.t
	t.Helper()
	cfg := buildsim.DefaultConfig()
	cfg.Protocol = protocol
	cfg.Endpoint = w.endpoint(protocol)
	cfg.ServiceName = service
	cfg.InstanceID = service + "-0"
	cfg.Seed = seed
	cfg.Jobs = jobs
	cfg.Rate = 100
	cfg.FailureRatio = 0.15
	cfg.CancelRatio = 0.05
	cfg.MetricInterval = 500 * time.Millisecond
	cfg.ExportTimeout = 5 * time.Second
	cfg.RetryMaxElapsed = 30 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := buildsim.Run(ctx, cfg, buildsim.WithLogf(t.Logf))
	require.NoError(t, err)
	e := s.Exports
	require.True(t, e.Complete(), "the sidecar refused exports for good: spans %q logs %q metrics %q",
		e.Spans.LastError, e.LogRecords.LastError, e.MetricPoints.LastError)
	require.Equal(t, s.Generated, s.Acknowledged, "the sidecar acknowledged less than was sent")
	return s
}

// sum adds up what the datums of one metric whose dimensions include want
// carry: a counter's deltas, whichever datum form the exporter chose.
func sum(datums []cloudwatchtest.Datum, metric string, want map[string]string) float64 {
	var s float64
	for _, d := range datums {
		if d.MetricName != metric || !hasDims(d, want) {
			continue
		}
		switch {
		case d.Statistics != nil:
			s += d.Statistics.Sum
		case len(d.Values) > 0:
			for i, v := range d.Values {
				c := 1.0
				if i < len(d.Counts) {
					c = d.Counts[i]
				}
				s += v * c
			}
		case d.Value != nil:
			s += *d.Value
		}
	}
	return s
}

func hasDims(d cloudwatchtest.Datum, want map[string]string) bool {
	for k, v := range want {
		if d.Dimensions[k] != v {
			return false
		}
	}
	return true
}

// mismatches compares what landed for one simulated service with its
// truth: every series of build.jobs, build.stage.runs and api.requests, each
// metric's total over the service (nothing beyond the truth), and the SDK's
// own counter (cumulative points turned into deltas, across restarts).
func mismatches(datums []cloudwatchtest.Datum, s *buildsim.Summary) []string {
	svc := map[string]string{"service.name": s.Service}
	var out []string
	check := func(metric string, want map[string]string, truth int64) {
		if got := sum(datums, metric, want); got != float64(truth) {
			out = append(out, fmt.Sprintf("%s{%s}: landed %v, sent %d", metric, dimKey(want), got, truth))
		}
	}
	for metric, series := range map[string][]buildsim.Series{
		"build.jobs":       s.Acknowledged.Jobs,
		"build.stage.runs": s.Acknowledged.StageRuns,
		"api.requests":     s.Acknowledged.APIRequests,
	} {
		var total int64
		for _, sr := range series {
			want := maps.Clone(sr.Attributes)
			maps.Copy(want, svc)
			check(metric, want, sr.Count)
			total += sr.Count
		}
		check(metric, svc, total)
	}
	check(s.SDKMetrics.Counter.Name, svc, s.SDKMetrics.Counter.Total)
	slices.Sort(out)
	return out
}

func dimKey(dims map[string]string) string {
	keys := slices.Sorted(maps.Keys(dims))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + dims[k]
	}
	return strings.Join(parts, ",")
}

// awaitExact waits until what landed equals the truth of every summary, then
// watches a few more PutMetricData requests (the exporter's 1 s batch
// flushes) so that a late duplicate is seen, and fails with the
// differences otherwise.
func (w *world) awaitExact(timeout time.Duration, sums ...*buildsim.Summary) {
	t := w.t
	t.Helper()
	all := func() []string {
		datums := w.cw.Datums()
		var out []string
		for _, s := range sums {
			out = append(out, mismatches(datums, s)...)
		}
		return out
	}
	if binarytest.Eventually(timeout, func() bool { return len(all()) == 0 }) {
		// The buildjob flush (10 s) and the batcher's 1 s: wait until a
		// further flush's requests arrived, or something differs.
		n := len(w.cw.Requests())
		binarytest.Eventually(15*time.Second, func() bool { return len(w.cw.Requests()) >= n+2 || len(all()) > 0 })
	}
	require.Empty(t, all(), "landed != sent after %v", timeout)
}
