// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build gpu

package nvml

import (
	"math"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
)

// smiGPU is one GPU as nvidia-smi reports it: the independent reading the
// collector's datums are checked against.
type smiGPU struct {
	index              string
	uuid, name         string
	memTotalMiB        float64
	powerLimitW        float64
	temperatureCelsius float64
}

func querySMI(t *testing.T) []smiGPU {
	out, err := exec.Command("nvidia-smi", "--query-gpu=index,uuid,name,memory.total,enforced.power.limit,temperature.gpu",
		"--format=csv,noheader,nounits").Output()
	require.NoError(t, err, "nvidia-smi must run where make gpu-smoke runs")
	var gpus []smiGPU
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, ",")
		require.Len(t, f, 6, "nvidia-smi line %q", line)
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		num := func(s string) float64 {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return math.NaN() // "[N/A]": not compared
			}
			return v
		}
		gpus = append(gpus, smiGPU{f[0], f[1], f[2], num(f[3]), num(f[4]), num(f[5])})
	}
	require.NotEmpty(t, gpus)
	return gpus
}

// TestDistributionOnRealGPU starts bin/otelcol-gpubuild on the shipped
// otelcol-config.yaml on a machine with NVIDIA GPUs (make gpu-smoke) and
// awaits, for every GPU nvidia-smi lists, the datums at a local CloudWatch
// endpoint, checked against nvidia-smi: the same UUID, index and model, the
// framebuffer size in bytes, the enforced power limit in W, a temperature
// within 10 °C of nvidia-smi's, and a utilization fraction in [0, 1].
func TestDistributionOnRealGPU(t *testing.T) {
	root := binarytest.RepoRoot()
	dir := t.TempDir()
	gpus := querySMI(t)

	cw, err := cloudwatchtest.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = cw.Close() })

	// The library is found as the host finds it (LD_LIBRARY_PATH kept).
	env := sidecarEnv(t, cw, dir)
	col := binarytest.StartBinary(t, env, "--config", filepath.Join(root, "otelcol-config.yaml"))

	type check struct {
		metric, unit string
		ok           func(v float64) bool
		want         string
	}
	for _, g := range gpus {
		checks := []check{
			{"hw.gpu.memory.limit", "Bytes", func(v float64) bool { return math.Abs(v/(1<<20)-g.memTotalMiB) <= 1 },
				strconv.FormatFloat(g.memTotalMiB, 'f', -1, 64) + " MiB"},
			{"hw.gpu.utilization", "None", func(v float64) bool { return v >= 0 && v <= 1 }, "a fraction in [0, 1]"},
		}
		if !math.IsNaN(g.powerLimitW) {
			checks = append(checks, check{"gpu.power.limit", "None", func(v float64) bool { return math.Abs(v-g.powerLimitW) < 0.5 },
				strconv.FormatFloat(g.powerLimitW, 'f', -1, 64) + " W"})
		}
		if !math.IsNaN(g.temperatureCelsius) {
			checks = append(checks, check{"hw.temperature", "None", func(v float64) bool { return math.Abs(v-g.temperatureCelsius) <= 10 },
				"within 10 of " + strconv.FormatFloat(g.temperatureCelsius, 'f', -1, 64) + " °C"})
		}
		for _, c := range checks {
			var last []float64
			found := func() bool {
				last = last[:0]
				for _, d := range cw.Datums() {
					if d.Namespace == namespace && d.MetricName == c.metric && d.Value != nil &&
						d.Dimensions["hw.id"] == g.uuid && d.Dimensions["gpu.index"] == g.index && d.Dimensions["hw.model"] == g.name {
						require.Equal(t, c.unit, d.Unit, c.metric)
						if c.ok(*d.Value) {
							return true
						}
						if !slices.Contains(last, *d.Value) {
							last = append(last, *d.Value)
						}
					}
				}
				return false
			}
			ok := binarytest.Eventually(90*time.Second, func() bool { return found() || col.Exited() })
			require.False(t, col.Exited(), "collector exited: %v", col.Err())
			require.True(t, ok, "GPU %s (%s): no %s datum %s within 90 s; distinct values seen: %v", g.index, g.uuid, c.metric, c.want, last)
			t.Logf("GPU %s %s: %s matches nvidia-smi (%s)", g.index, g.uuid, c.metric, c.want)
		}
	}
	require.Contains(t, col.Output.String(), "NVML loaded")
}
