// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package exact compares what landed at the local CloudWatch endpoint for
// one simulated build service (internal/testing/buildsim) with what it sent: every
// series of the derived counters and the service's own SDK counter, with
// nothing beyond the truth.
package exact

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/buildsim"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
)

// Sum adds up what the datums of one metric whose dimensions include want
// carry: a counter's deltas, whichever datum form the exporter chose.
func Sum(datums []cloudwatchtest.Datum, metric string, want map[string]string) float64 {
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

// Mismatches compares what landed for one simulated service with its
// truth: every series of build.jobs, build.stage.runs and api.requests, each
// metric's total over the service (nothing beyond the truth), and the SDK's
// own counter (cumulative points turned into deltas, across restarts). It
// returns one line per difference, sorted; none when exact.
func Mismatches(datums []cloudwatchtest.Datum, s *buildsim.Summary) []string {
	svc := map[string]string{"service.name": s.Service}
	var out []string
	check := func(metric string, want map[string]string, truth int64) {
		if got := Sum(datums, metric, want); got != float64(truth) {
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

// Await waits until what landed at cw equals the truth of every summary,
// then watches a few more PutMetricData requests (the exporter's 1 s batch
// flushes, the buildjob flush every 10 s) so that a late duplicate is seen,
// and fails the test with the differences otherwise.
func Await(t testing.TB, cw *cloudwatchtest.Server, timeout time.Duration, sums ...*buildsim.Summary) {
	t.Helper()
	all := func() []string {
		datums := cw.Datums()
		var out []string
		for _, s := range sums {
			out = append(out, Mismatches(datums, s)...)
		}
		return out
	}
	if binarytest.Eventually(timeout, func() bool { return len(all()) == 0 }) {
		n := len(cw.Requests())
		binarytest.Eventually(15*time.Second, func() bool { return len(cw.Requests()) >= n+2 || len(all()) > 0 })
	}
	require.Empty(t, all(), "landed != sent after %v", timeout)
}
