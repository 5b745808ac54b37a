// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package dashboards checks the shipped dashboards and alarms (deploy/prometheus,
// deploy/grafana, deploy/cloudwatch) against what the built sidecar really
// sends: one run of bin/otelcol-gpubuild with a fake two-GPU driver and a
// simulated build service (successes, failures, builds that time out, API
// 4xx and 5xx), sending to two Prometheus servers (scrape and remote write)
// and to the local CloudWatch endpoint.
package dashboards

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/buildsim"
)

// expectedAlerts are the alerts the workload must make fire: failures and
// timeouts take the success rate under 90 %, runs time out, 10 % of API
// requests answer 5xx. Builds are minutes long (p99 under 20 minutes), both
// GPUs report throughout, cool, without ECC errors.
var expectedAlerts = []string{"GPUBuildAPI5xxRateHigh", "GPUBuildSuccessRateLow", "GPUBuildTimedOut"}

func TestDashboardsAgainstRealOutput(t *testing.T) {
	ruleExprs, alerts := loadRules(t)
	grafanaExprs, labelValues := loadGrafana(t)
	for _, a := range expectedAlerts {
		require.Contains(t, alerts, a)
	}
	cwBody, err := os.ReadFile(filepath.Join(binarytest.RepoRoot(), cwDashboardPath))
	require.NoError(t, err)
	dashRefs := dashboardRefs(t, cwBody, cwDashboardPath)

	r := startRun(t, []string{rulesWithoutFor(t)})
	r.drive(t)
	truth := r.summary.Acknowledged
	require.Positive(t, truth.JobsByResult[buildsim.ResultSuccess])
	require.Positive(t, truth.JobsByResult[buildsim.ResultFailure])
	require.Positive(t, truth.DanglingStarts, "the workload has builds that never end")
	wantJobs := float64(truth.DanglingStarts)
	for _, n := range truth.JobsByResult {
		wantJobs += float64(n)
	}

	// Every run, timeouts included, has landed in both Prometheus servers
	// and at CloudWatch before anything is judged.
	servers := map[string]*prometheusServer{"prometheus (scrape)": r.scrape, "prometheus (remote write)": r.remote}
	var landed map[string]float64
	ok := binarytest.Eventually(90*time.Second, func() bool {
		landed = map[string]float64{}
		for name, p := range servers {
			if s, err := p.query(`sum(build_jobs_total)`); err == nil && len(s) == 1 {
				if v, ok := s[0].float(); ok {
					landed[name] = v
				}
			}
		}
		for _, d := range r.cw.Datums() {
			if d.MetricName == "build.jobs" && d.Value != nil {
				landed["cloudwatch"] += *d.Value
			}
		}
		return len(landed) == 3 && !slices.ContainsFunc(slices.Collect(maps.Values(landed)), func(v float64) bool { return v != wantJobs })
	})
	require.True(t, ok, "build runs landed %v, want %v everywhere", landed, wantJobs)

	t.Run("prometheus rules and grafana panels return data", func(t *testing.T) {
		exprs := append(slices.Clone(ruleExprs), grafanaExprs...)
		for name, p := range servers {
			var empty []string
			// Rules are evaluated every second and rates need two samples:
			// wait for the checks to settle, then report what is still empty.
			binarytest.Eventually(30*time.Second, func() bool { empty = emptyQueries(p, exprs); return len(empty) == 0 })
			require.Empty(t, empty, "%s: queries that return nothing from what the sidecar sent", name)
			for _, lv := range labelValues {
				samples, err := p.query(fmt.Sprintf("count by (%s) (%s)", lv[1], lv[0]))
				require.NoError(t, err)
				require.NotEmpty(t, samples, "%s: Grafana variable label_values(%s, %s) would be empty", name, lv[0], lv[1])
			}
		}
	})

	t.Run("the expected alerts fire and no other", func(t *testing.T) {
		for name, p := range servers {
			var firing map[string]int
			ok := binarytest.Eventually(30*time.Second, func() bool {
				firing, _ = p.firingAlerts()
				return slices.Equal(slices.Sorted(maps.Keys(firing)), expectedAlerts)
			})
			require.True(t, ok, "%s: firing %v, want %v", name, firing, expectedAlerts)
			// None fired at any moment of the run either.
			ever, err := p.query(`count by (alertname) (max_over_time(ALERTS{alertstate="firing"}[10m]))`)
			require.NoError(t, err)
			var names []string
			for _, s := range ever {
				names = append(names, s.Metric["alertname"])
			}
			require.Equal(t, expectedAlerts, slices.Sorted(slices.Values(names)), "%s: alerts that fired during the run", name)
			// One alert per service, not per engine or data type.
			for _, a := range expectedAlerts {
				require.Equal(t, 1, firing[a], "%s: %s", name, a)
			}
		}
	})

	t.Run("cloudwatch PromQL alarms read what cloudwatch-otlp received", func(t *testing.T) {
		checkPromQLAlarms(t, r.cwOTLP, r.scrape)
	})

	t.Run("cloudwatch dashboard and alarms match landed datums", func(t *testing.T) {
		datums := r.cw.Datums()
		require.Empty(t, landedOrLoss(dashRefs, datums), "dashboard widgets that would be empty")
		// The GPU cost per build landed, every figure of it, and the list
		// the coverage test checks is what the sidecar sends.
		gpuCost := map[string]bool{}
		for _, d := range datums {
			if isGPUCostMetric(d.MetricName) {
				gpuCost[d.MetricName] = true
			}
		}
		require.ElementsMatch(t, slices.Collect(maps.Keys(gpuCostMetrics)), slices.Collect(maps.Keys(gpuCost)))

		resources := loadTemplate(t, map[string]any{
			"ServiceName":    serviceName,
			"BuildEngines":   workload("").Engines,
			"BuildDataTypes": workload("").DataTypes,
		})
		// The template's dashboard is dashboard.json.
		dash, ok := resources["Dashboard"]
		require.True(t, ok)
		body := dash["Properties"].(map[string]any)["DashboardBody"].(string)
		var fromTemplate, standalone any
		require.NoError(t, json.Unmarshal([]byte(body), &fromTemplate))
		require.NoError(t, json.Unmarshal(cwBody, &standalone))
		require.Equal(t, standalone, fromTemplate, "the template's DashboardBody differs from %s", cwDashboardPath)

		refs, alarms := alarmRefs(t, resources)
		require.Empty(t, landedOrLoss(refs, datums), "alarms on series that did not land")
		// One p99 alarm and one GPU energy alarm per engine and data type
		// of the workload, and one of each other.
		want := []string{"API5xxRateAlarm", "BuildSuccessRateAlarm", "BuildTimeoutAlarm", "GPUMissingAlarm", "GPUTemperatureAlarm", "SidecarNoDataAlarm",
			"PipelinePointsLostAlarm", "PipelineRefusingAlarm", "PipelineQueueFillingAlarm", "DestinationRefusingAlarm", "GatewayRefusingAlarm", "NVMLErrorsAlarm"}
		for _, e := range workload("").Engines {
			for _, d := range workload("").DataTypes {
				want = append(want, "BuildP99Alarm"+strings.ReplaceAll(e, "_", "")+d, "GPUEnergyAlarm"+strings.ReplaceAll(e, "_", "")+d)
			}
		}
		require.ElementsMatch(t, want, alarms)
	})
}
