// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package destinations

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
)

// derivedKeys are the totals the sidecar derives (delta at the source, so
// their cumulative series exist only in the sidecar's conversion).
var derivedKeys = []string{"build.stage.runs", "api.requests"}

func derivedOnly(t totals) totals {
	out := totals{}
	for k, v := range t {
		if k == "build.stage.runs" || k == "api.requests" || len(k) > len("build.jobs{") && k[:len("build.jobs{")] == "build.jobs{" {
			out[k] = v
		}
	}
	return out
}

// latestDerived is latestTotal for the derived sums.
func (s *otlpSink) latestDerived(results []string) totals {
	out := totals{}
	for _, r := range results {
		if v := s.latestTotal("build.jobs", map[string]string{"build.result": r}); v > 0 {
			out["build.jobs{"+r+"}"] = v
		}
	}
	for _, k := range derivedKeys {
		out[k] = s.latestTotal(k, nil)
	}
	return out
}

// lastDerivedTotals reads the derived counters' last stored values, one
// series each (a series the second workload did not update is absent from
// the scrape after the restart, until its next point, but keeps its last
// value in the store).
func lastDerivedTotals(p *prometheusServer) (totals, error) {
	out := totals{}
	jobs, err := p.ByLabel(`sum by (build_result) (last_over_time(build_jobs_total[1h]))`, "build_result")
	if err != nil {
		return nil, err
	}
	for result, v := range jobs {
		out["build.jobs{"+result+"}"] = v
	}
	for key, promql := range map[string]string{
		"build.stage.runs": `sum(last_over_time(build_stage_runs_total[1h]))`,
		"api.requests":     `sum(last_over_time(api_requests_total[1h]))`,
	} {
		samples, err := p.Query(promql)
		if err != nil {
			return nil, err
		}
		if len(samples) == 1 {
			out[key] = samples[0].Value
		}
	}
	return out, nil
}

// Every store through a sidecar restart, SIGTERM and kill -9: a workload,
// the restart on the same queue directory while the service goes on (same
// resource), a second workload. The derived series are one series in every
// cumulative store, continued with no reset: their last value is the truth
// of both workloads (Prometheus' scrape and remote write read by instant
// query, the OTLP stores by the newest point whatever its start time); the
// service's own cumulative series, which the restarted SDK starts again,
// add up across the reset in the OTLP stores (by start time) and in
// PutMetricData's deltas. (In Prometheus a service restarted under the same
// identity resets its series, which Prometheus sees only when the value
// falls: a property of the store, not of the sidecar, so the service's own
// series are not compared there; real restarts get a new instance id.)
// Before the persisted conversion the scrape read only the second
// workload's counts.
func TestEveryStoreExactAcrossRestarts(t *testing.T) {
	for _, kill := range []bool{false, true} {
		t.Run(map[bool]string{false: "SIGTERM", true: "kill -9"}[kill], func(t *testing.T) {
			s := startStores(t)
			p := newCollectorPorts(t)
			queueDir := t.TempDir()
			env := s.env(p, queueDir)
			c := startCollector(t, p, env)

			first := truthTotals(runSim(t, simConfig(p, "vector-index-build", 61)))
			awaitExact(t, s, first, destinationNames, 2*time.Minute)
			if kill {
				c.Kill9()
			} else {
				_, err := c.Stop(60 * time.Second)
				require.NoError(t, err)
			}

			startCollector(t, p, env)
			want := truthTotals(runSim(t, simConfig(p, "vector-index-build", 62)))
			for k, v := range first {
				want[k] += v
			}
			results := resultsOf(want)
			derived := derivedOnly(want)

			read := func() map[string]totals {
				got := map[string]totals{"cloudwatch": cloudWatchTotals(s.cw.Datums(), results)}
				for name, sink := range map[string]*otlpSink{"otlp": s.otlp, "cloudwatch-otlp": s.cwOTLP} {
					got[name] = sink.latestDerived(results)
					got[name+" (service's series)"] = otlpTotals(sink, results)
				}
				for name, prom := range map[string]*prometheusServer{"prometheus": s.scrape, "prometheus-remote-write": s.remote} {
					if last, err := lastDerivedTotals(prom); err == nil {
						got[name] = last
					}
				}
				return got
			}
			expect := map[string]totals{
				"cloudwatch": want, "otlp": derived, "cloudwatch-otlp": derived, "prometheus": derived, "prometheus-remote-write": derived,
				"otlp (service's series)": want, "cloudwatch-otlp (service's series)": want,
			}
			// The kill comes right after the first workload landed: it may
			// fall between CloudWatch's answer and the exporter's record of
			// it, and that request is sent again (docs/guarantees.md). The
			// cumulative stores take a point sent again as it was; the
			// PutMetricData deltas count it again, at most once per series
			// and kill, so at most the series' total before the kill.
			resendable := map[string]totals{}
			if kill {
				resendable["cloudwatch"] = first
			}
			var got map[string]totals
			ok := binarytest.Eventually(2*time.Minute, func() bool {
				got = read()
				for k, w := range expect {
					if !withinResent(got[k], w, resendable[k]) {
						return false
					}
				}
				return true
			})
			if !ok {
				for k, w := range expect {
					if !withinResent(got[k], w, resendable[k]) {
						t.Errorf("%s: got %v, want %v (up to %v more sent again after the kill)", k, got[k], w, resendable[k])
					}
				}
			}
		})
	}
}

// telemetryCounter sums the collector's own counter metric over the series
// whose labels include label="value".
func telemetryCounter(t testing.TB, p collectorPorts, metric, label, value string) float64 {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", p.Telemetry))
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(metric) + `(?:_total)?\{[^}]*` + label + `="` + regexp.QuoteMeta(value) + `"[^}]*\} (\S+)$`)
	var total float64
	for _, m := range re.FindAllStringSubmatch(string(body), -1) {
		v, err := strconv.ParseFloat(m[1], 64)
		require.NoError(t, err)
		total += v
	}
	return total
}

// One destination's queue full (its store down, a queue of one batch)
// while the others run: its exporter refuses, the fanout holds what it
// refused for it alone (counted), the others are exact meanwhile and were
// sent nothing twice (their totals would exceed the truth), and the full
// one is exact once its store is back.
func TestOneDestinationQueueFullOthersExact(t *testing.T) {
	s := startStores(t)
	s.otlp.down.Store(true)
	p := newCollectorPorts(t)
	startCollector(t, p, append(s.env(p, t.TempDir()), "GPUBUILD_DESTINATION_QUEUE_SIZE=1"))

	want := truthTotals(runSim(t, simConfig(p, "vector-index-build", 71)))
	others := slices.DeleteFunc(slices.Clone(destinationNames), func(n string) bool { return n == "otlp" })
	awaitExact(t, s, want, others, 2*time.Minute)
	require.Positive(t, telemetryCounter(t, p, "otelcol_fanout_refusals", "pipeline", "metrics/otlp"),
		"the full queue refused, and the fanout held it for that destination")
	require.Zero(t, telemetryCounter(t, p, "otelcol_fanout_points_dropped", "pipeline", "metrics/otlp"))

	s.otlp.down.Store(false)
	awaitExact(t, s, want, destinationNames, 2*time.Minute)
}

// otlp with GPUBUILD_OTLP_TEMPORALITY=delta through a kill -9: the deltas
// the store received add up to the truth of both workloads. The service's
// cumulative series are converted with their state on disk, so neither the
// increment before the kill is sent again nor the first point after it
// dropped (an in-memory conversion with initial_value auto drops it).
func TestOTLPDeltaExactAcrossAKill(t *testing.T) {
	g := startOTLPGRPCSink(t)
	p := newCollectorPorts(t)
	env := collectorEnv(p, t.TempDir(),
		"GPUBUILD_DESTINATIONS=otlp",
		"GPUBUILD_OTLP_ENDPOINT="+g.sink.URL,
		"GPUBUILD_OTLP_PROTOCOL=grpc",
		"GPUBUILD_OTLP_TEMPORALITY=delta",
	)
	c := startCollector(t, p, env)
	await := func(want, resendable totals) {
		t.Helper()
		var got totals
		if !binarytest.Eventually(2*time.Minute, func() bool {
			got = g.sink.deltaTotals(resultsOf(want))
			return withinResent(got, want, resendable)
		}) {
			t.Fatalf("otlp (delta): got %v, want %v (up to %v more sent again after the kill)", got, want, resendable)
		}
	}
	want := truthTotals(runSim(t, simConfig(p, "vector-index-build", 81)))
	await(want, nil)
	// The kill right after the deltas landed may fall between the store's
	// answer and the queue's record of it: that request is sent again, at
	// most one delta per series, so at most the totals before the kill.
	first := maps.Clone(want)
	c.Kill9()

	startCollector(t, p, env)
	for k, v := range truthTotals(runSim(t, simConfig(p, "vector-index-build", 82))) {
		want[k] += v
	}
	await(want, first)
}

// withinResent reports whether got has the keys of want, each at least
// its value and at most extra's more (extra nil: exactly).
func withinResent(got, want, extra totals) bool {
	if extra == nil {
		return maps.Equal(got, want)
	}
	if len(got) != len(want) {
		return false
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok || g < w || g > w+extra[k] {
			return false
		}
	}
	return true
}
