// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package nvml runs the built distribution with a fake libnvidia-ml.so.1 on
// its library path and checks that its GPU metrics reach a local CloudWatch
// endpoint with the values the fake driver reports; with -tags gpu (make
// gpu-smoke) it runs it on the machine's real GPUs against nvidia-smi.
package nvml

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
	"github.com/gpubuild/otelcol-gpubuild/receiver/nvmlreceiver/fakenvml"
)

const namespace = "GPUBuild/NVML"

func scenario() fakenvml.Scenario {
	sc := fakenvml.Scenario{Driver: "535.161.08"}
	for i := range 2 {
		u := uint32(i)
		sc.GPUs = append(sc.GPUs, fakenvml.GPU{
			UUID: fmt.Sprintf("GPU-e2e00000-0000-4000-8000-00000000000%d", i), Name: "NVIDIA A100-SXM4-80GB",
			BusID:    fmt.Sprintf("00000000:%02X:00.0", 0x07+i),
			MemTotal: 80 << 30, MemUsed: uint64(i+2) << 30, MemReserved: 256 << 20,
			Temperature: 51 + u, PowerMW: 250_500 + 1_000*u, PowerLimitMW: 400_000, EnergyMJ: 5_000_000,
			ClockSM: 1410, ClockMem: 1593, ClockGraphics: 1410,
			// No samples: utilization comes from the instantaneous rate.
			UtilGPU: 64 + u, UtilMem: 20,
			PowerUnsupported: i == 1,
		})
	}
	return sc
}

// TestDistributionWithFakeNVML starts bin/otelcol-gpubuild on the shipped
// otelcol-config.yaml with the fake NVML found through LD_LIBRARY_PATH and
// awaits the GPU gauges at the CloudWatch endpoint: values converted to the
// exported units (W from mW, fraction from percent), one series per GPU, and
// no power datum for the GPU that answers NOT_SUPPORTED.
func TestDistributionWithFakeNVML(t *testing.T) {
	root := binarytest.RepoRoot()
	dir := t.TempDir()
	libDir := filepath.Join(dir, "lib")
	require.NoError(t, os.Mkdir(libDir, 0o700))
	_, err := fakenvml.Build(libDir, root)
	require.NoError(t, err)
	sc := scenario()
	scenarioPath := filepath.Join(dir, "scenario.txt")
	require.NoError(t, sc.WriteFile(scenarioPath))
	statePath := filepath.Join(dir, "state.txt")
	require.NoError(t, fakenvml.State{}.WriteFile(statePath))

	cw, err := cloudwatchtest.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = cw.Close() })

	env := sidecarEnv(t, cw, dir,
		"LD_LIBRARY_PATH="+libDir,
		fakenvml.EnvScenario+"="+scenarioPath,
		fakenvml.EnvState+"="+statePath,
	)
	col := binarytest.StartBinary(t, env, "--config", filepath.Join(root, "otelcol-config.yaml"))

	type want struct {
		metric, unit string
		gpu          int
		value        float64
	}
	var wants []want
	for i, g := range sc.GPUs {
		wants = append(wants,
			want{"hw.temperature", "None", i, float64(g.Temperature)},
			want{"hw.gpu.utilization", "None", i, float64(g.UtilGPU) / 100},
			want{"gpu.memory.controller.utilization", "None", i, float64(g.UtilMem) / 100},
		)
		if !g.PowerUnsupported {
			wants = append(wants,
				want{"hw.power", "None", i, float64(g.PowerMW) / 1000},
				want{"gpu.power.limit", "None", i, float64(g.PowerLimitMW) / 1000})
		}
	}
	found := func(w want) bool {
		for _, d := range cw.Datums() {
			if d.Namespace == namespace && d.MetricName == w.metric && d.Unit == w.unit && d.Value != nil &&
				d.Dimensions["hw.id"] == sc.GPUs[w.gpu].UUID && d.Dimensions["gpu.index"] == strconv.Itoa(w.gpu) &&
				d.Dimensions["hw.model"] == sc.GPUs[w.gpu].Name && math.Abs(*d.Value-w.value) < 1e-9 {
				return true
			}
		}
		return false
	}
	deadline := time.Now().Add(90 * time.Second)
	for _, w := range wants {
		ok := binarytest.Eventually(time.Until(deadline), func() bool { return found(w) || col.Exited() })
		require.False(t, col.Exited(), "collector exited: %v", col.Err())
		require.True(t, ok, "no %s datum for GPU %d with value %v (unit %s) within 90 s", w.metric, w.gpu, w.value, w.unit)
	}
	for _, d := range cw.Datums() {
		if d.MetricName == "hw.power" || d.MetricName == "gpu.power.limit" || d.MetricName == "hw.energy" {
			require.NotEqual(t, sc.GPUs[1].UUID, d.Dimensions["hw.id"], "GPU 1 answers NOT_SUPPORTED for power")
		}
	}
	require.Contains(t, col.Output.String(), "NVML loaded")
}

// sidecarEnv is the environment of the distribution under test: static
// test credentials, PutMetricData to cw in the test namespace, GPU scrapes
// every second, free ports, the queue in dir, then extra (a later entry
// overrides an earlier one of the same name).
func sidecarEnv(t *testing.T, cw *cloudwatchtest.Server, dir string, extra ...string) []string {
	ports := binarytest.FreePorts(t, 4)
	port := func() string { p := ports[0]; ports = ports[1:]; return strconv.Itoa(p) }
	env := append(binarytest.EnvWithout("AWS_", "GPUBUILD_", "OTEL_", "FAKE_NVML_"),
		"AWS_REGION=us-east-1",
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_ACCESS_KEY_ID=AKIDNVMLE2E000000001",
		"AWS_SECRET_ACCESS_KEY=nvmlE2ESecretNotUsedAnywhere",
		"AWS_CONFIG_FILE=/dev/null",
		"AWS_SHARED_CREDENTIALS_FILE=/dev/null",
		"GPUBUILD_CLOUDWATCH_OUTPUT=cloudwatch",
		"GPUBUILD_CLOUDWATCH_ENDPOINT="+cw.Endpoint(),
		"GPUBUILD_CLOUDWATCH_NAMESPACE="+namespace,
		"GPUBUILD_QUEUE_DIR="+filepath.Join(dir, "queue"),
		"GPUBUILD_GPU_COLLECTION_INTERVAL=1s",
		"GPUBUILD_HEALTH_PORT="+port(),
		"GPUBUILD_OTLP_GRPC_PORT="+port(),
		"GPUBUILD_OTLP_HTTP_PORT="+port(),
		"GPUBUILD_TELEMETRY_PORT="+port(),
	)
	return append(env, extra...)
}
