// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package dashboards

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
)

// gpuCostMetrics are the GPU cost per build the buildjob connector emits
// (docs/buildjob.md), by CloudWatch name and Prometheus base name (the
// histogram's _bucket, _sum and _count carry it).
// TestDashboardsAgainstRealOutput checks that this list is exactly what the
// sidecar sends.
var gpuCostMetrics = map[string]string{
	"build.gpu.energy":                "build_gpu_energy_joules",
	"build.gpu.busy_time":             "build_gpu_busy_time_seconds",
	"build.gpu.memory.peak":           "build_gpu_memory_peak_bytes",
	"build.gpu.sm_activity":           "build_gpu_sm_activity",
	"build.gpu.tensor_activity":       "build_gpu_tensor_activity",
	"build.stage.gpu.energy":          "build_stage_gpu_energy_joules",
	"build.stage.gpu.busy_time":       "build_stage_gpu_busy_time_seconds",
	"build.stage.gpu.memory.peak":     "build_stage_gpu_memory_peak_bytes",
	"build.stage.gpu.sm_activity":     "build_stage_gpu_sm_activity",
	"build.stage.gpu.tensor_activity": "build_stage_gpu_tensor_activity",
}

// isGPUCostMetric: a CloudWatch metric name the list above must hold.
func isGPUCostMetric(name string) bool {
	return strings.HasPrefix(name, "build.gpu.") || strings.HasPrefix(name, "build.stage.gpu.")
}

// promUses reports whether a PromQL expression reads the histogram base.
func promUses(expr, base string) bool {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if strings.Contains(expr, base+suffix) {
			return true
		}
	}
	return false
}

// Every GPU cost metric has a panel in the Grafana and the CloudWatch
// dashboards, and a Prometheus rule and a CloudWatch alarm or recording
// use it.
func TestGPUCostMetricsOnEveryDashboard(t *testing.T) {
	ruleExprs, _ := loadRules(t)
	grafanaExprs, _ := loadGrafana(t)
	cwBody, err := os.ReadFile(filepath.Join(binarytest.RepoRoot(), cwDashboardPath))
	require.NoError(t, err)
	cwRefs := dashboardRefs(t, cwBody, cwDashboardPath)
	resources := loadTemplate(t, map[string]any{
		"ServiceName":    serviceName,
		"BuildEngines":   workload("").Engines,
		"BuildDataTypes": workload("").DataTypes,
	})
	alarms, _ := alarmRefs(t, resources)

	var inRules, inGrafana []string
	for _, e := range ruleExprs {
		inRules = append(inRules, e.expr)
	}
	for _, e := range grafanaExprs {
		inGrafana = append(inGrafana, e.expr)
	}
	for cw, prom := range gpuCostMetrics {
		require.True(t, isGPUCostMetric(cw), cw)
		require.True(t, anyUses(inGrafana, prom), "%s (%s): no Grafana panel", cw, prom)
		require.True(t, anyUses(inRules, prom), "%s (%s): no Prometheus rule", cw, prom)
		require.True(t, refsMetric(cwRefs, cw), "%s: no CloudWatch dashboard widget", cw)
	}
	require.True(t, refsMetric(alarms, "build.gpu.energy"), "no CloudWatch alarm on the energy per build")
}

func anyUses(exprs []string, base string) bool {
	for _, e := range exprs {
		if promUses(e, base) {
			return true
		}
	}
	return false
}

func refsMetric(refs []cwRef, metric string) bool {
	for _, r := range refs {
		if r.metric == metric {
			return true
		}
	}
	return false
}
