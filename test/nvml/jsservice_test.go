// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package nvml

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
	"github.com/gpubuild/otelcol-gpubuild/receiver/nvmlreceiver/fakenvml"
)

// TestGPUCostWithJSService runs the JavaScript build service
// (test/jsservice: the OTel JS SDK at its defaults, process.pid on its
// resource from the SDK's process detector) beside the built sidecar with
// the fake NVML on the wall clock: GPU 0 draws a constant 250 W at 60 %
// and the service's process holds 4 GiB on it; GPU 1 (80 W) holds nothing
// of it. Three builds run one after the other (two succeed, one fails at
// upload), each with four stages. With a constant draw each run's figures
// follow from its duration, whatever the service's timing: energy = 250 W x
// build.job.duration (within 1e-4 + 50 mJ: the counter reads are stamped
// with the host clock around each NVML call), busy time =
// 0.6 x duration (1e-6), peak memory 4 GiB; and the same per stage.
func TestGPUCostWithJSService(t *testing.T) {
	root := binarytest.RepoRoot()
	jsDir := filepath.Join(root, "test/jsservice")
	_, err := os.Stat(filepath.Join(jsDir, "node_modules/@opentelemetry/sdk-node"))
	require.NoError(t, err, "test/jsservice/node_modules missing: run `make jsservice-deps` (npm ci; `make test` runs it)")
	dir := t.TempDir()
	libDir := filepath.Join(dir, "lib")
	require.NoError(t, os.Mkdir(libDir, 0o700))
	_, err = fakenvml.Build(libDir, root)
	require.NoError(t, err)

	ports := binarytest.FreePorts(t, 3)
	httpPort, svcPort, telPort := ports[0], ports[1], ports[2]
	// The service first: the scenario names its process.
	svc := exec.Command("node", "service.js")
	svc.Dir = jsDir
	svcOut := &binarytest.Buffer{}
	svc.Stdout, svc.Stderr = svcOut, svcOut
	svc.Env = append(binarytest.EnvWithout("OTEL_", "PORT="), "PORT="+strconv.Itoa(svcPort),
		"OTEL_SERVICE_NAME=vector-index-build", "OTEL_LOG_LEVEL=warn",
		"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf", fmt.Sprintf("OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:%d", httpPort),
		"OTEL_BSP_SCHEDULE_DELAY=200", "OTEL_BLRP_SCHEDULE_DELAY=200")
	require.NoError(t, svc.Start())
	t.Cleanup(func() { _ = svc.Process.Kill(); _ = svc.Wait() })
	svcURL := "http://127.0.0.1:" + strconv.Itoa(svcPort)
	require.True(t, binarytest.Eventually(20*time.Second, func() bool {
		r, err := http.Get(svcURL + "/_truth")
		if err == nil {
			_ = r.Body.Close()
		}
		return err == nil
	}), "the service did not answer:\n%s", svcOut.String())

	now := uint64(time.Now().UnixMicro())
	const s = uint64(1_000_000)
	g0 := fakenvml.GPU{
		UUID: "GPU-c0570000-0000-4000-8000-0000000000f0", Name: "NVIDIA H100 80GB HBM3", BusID: "00000000:18:00.0",
		MemTotal: 80 << 30, PowerLimitMW: 700_000, EnergyMJ: 1_000_000, Temperature: 40, UtilGPU: 1,
		Power:         []fakenvml.PowerStep{{FromUs: now - 60*s, MW: 250_000}},
		ProcessMemory: []fakenvml.ProcessMemoryStep{{PID: uint32(svc.Process.Pid), FromUs: now - 60*s, Bytes: 4 * gib}},
	}
	for ts := now - 5*s; ts <= now+300*s && len(g0.GPUSamples) < 4000; ts += s / 10 {
		g0.GPUSamples = append(g0.GPUSamples, fakenvml.Sample{TimestampUs: ts, Percent: 60})
	}
	g1 := fakenvml.GPU{
		UUID: "GPU-c0570000-0000-4000-8000-0000000000f1", Name: "NVIDIA H100 80GB HBM3", BusID: "00000000:19:00.0",
		MemTotal: 80 << 30, PowerLimitMW: 700_000, Temperature: 40, UtilGPU: 7, SamplesUnsupported: true,
		Power: []fakenvml.PowerStep{{FromUs: now - 60*s, MW: 80_000}},
	}
	scenarioPath := filepath.Join(dir, "scenario.txt")
	require.NoError(t, fakenvml.Scenario{Driver: "550.54.15", Realtime: true, GPUs: []fakenvml.GPU{g0, g1}}.WriteFile(scenarioPath))

	cw, err := cloudwatchtest.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = cw.Close() })
	env := sidecarEnv(t, cw, dir,
		"LD_LIBRARY_PATH="+libDir,
		fakenvml.EnvScenario+"="+scenarioPath,
		"GPUBUILD_GPU_SAMPLING_INTERVAL=250ms",
		"GPUBUILD_FLUSH_INTERVAL=1s",
		"GPUBUILD_OTLP_HTTP_PORT="+strconv.Itoa(httpPort),
		"GPUBUILD_TELEMETRY_PORT="+strconv.Itoa(telPort),
	)
	col := binarytest.StartBinary(t, env, "--config", filepath.Join(root, "otelcol-config.yaml"))
	require.True(t, binarytest.Eventually(20*time.Second, func() bool {
		return col.Exited() || containsAll(col.Output.String(), "sampling GPUs", "Everything is ready")
	}), "the sidecar did not start sampling:\n%s", col.Output.String())
	time.Sleep(time.Second) // samples before the first run

	post := func(path string, body any) *http.Response {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		r, err := http.Post(svcURL+path, "application/json", bytes.NewReader(b))
		require.NoError(t, err)
		return r
	}
	for i, failAt := range []string{"", "upload", ""} {
		body := map[string]any{"vector_path": fmt.Sprintf("s3://vectors/%d", i), "tenant_id": "t", "stage_ms": 300}
		if failAt != "" {
			body["fail_at"] = failAt
		}
		r := post("/_build", body)
		var job struct {
			JobID string `json:"job_id"`
		}
		require.NoError(t, json.NewDecoder(r.Body).Decode(&job))
		_ = r.Body.Close()
		require.True(t, binarytest.Eventually(10*time.Second, func() bool {
			r, err := http.Get(svcURL + "/_status/" + job.JobID)
			if err != nil {
				return false
			}
			defer r.Body.Close()
			var st struct {
				TaskStatus string `json:"task_status"`
			}
			return json.NewDecoder(r.Body).Decode(&st) == nil && st.TaskStatus != "RUNNING"
		}))
	}
	r, err := http.Post(svcURL+"/_flush", "", nil)
	require.NoError(t, err)
	_ = r.Body.Close()
	require.Equal(t, http.StatusNoContent, r.StatusCode)

	// values collects a metric's observations for one result (and stage):
	// at most two runs per series, so the datums' values are exact (each
	// histogram's min and max are sent as values of their own).
	values := func(metric, result, stage string) []float64 {
		var out []float64
		for _, d := range cw.Datums() {
			if d.MetricName != metric || d.Dimensions["build.result"] != result || d.Dimensions["build.stage"] != stage {
				continue
			}
			for i, v := range d.Values {
				for range int(d.Counts[i]) {
					out = append(out, v)
				}
			}
		}
		slices.Sort(out)
		return out
	}
	// Runs per series: the failed build's first three stages succeeded.
	type series struct {
		result, stage, prefix string
		runs                  int
	}
	checks := []series{
		{"success", "", "build.job", 2}, {"failure", "", "build.job", 1},
		{"success", "download", "build.stage", 3}, {"success", "gpu_build", "build.stage", 3},
		{"success", "gpu_to_cpu", "build.stage", 3}, {"success", "upload", "build.stage", 2},
		{"failure", "upload", "build.stage", 1},
	}
	for _, c := range checks {
		runs := c.runs
		gpuPrefix := "build.gpu."
		if c.stage != "" {
			gpuPrefix = "build.stage.gpu."
		}
		var durations, energy, busy, peak []float64
		ok := binarytest.Eventually(30*time.Second, func() bool {
			durations = values(c.prefix+".duration", c.result, c.stage)
			energy = values(gpuPrefix+"energy", c.result, c.stage)
			busy = values(gpuPrefix+"busy_time", c.result, c.stage)
			peak = values(gpuPrefix+"memory.peak", c.result, c.stage)
			return col.Exited() || (len(durations) == runs && len(energy) == runs && len(busy) == runs && len(peak) == runs)
		})
		require.False(t, col.Exited(), "collector exited: %v", col.Err())
		require.True(t, ok, "%+v: durations %v energy %v busy %v peak %v\n%s", c, durations, energy, busy, peak, col.Output.String())
		for i, d := range durations {
			// Each counter read is stamped halfway through its NVML call on
			// the host clock: a call descheduled for a few ms on a loaded
			// machine moves a window's edge by that much, up to 1 J at
			// 250 W (seen: 0.083 J under make test). A wrong window is off
			// by tens of joules.
			assert.LessOrEqual(t, math.Abs(energy[i]-250*d), 1e-4*250*d+1, "%+v energy: %v J for %v s", c, energy[i], d)
			assert.LessOrEqual(t, math.Abs(busy[i]-0.6*d), 1e-6*0.6*d, "%+v busy: %v s for %v s", c, busy[i], d)
			assert.Equal(t, float64(4*gib), peak[i], "%+v peak memory", c)
		}
	}
}
