// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build gpu

package nvml

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	"go.opentelemetry.io/otel/trace"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
)

// gpuLoad is a PyTorch program that holds bf16 matrices on cuda:0, prints
// "ready" and then, for each line "busy <seconds> <duty>", multiplies them
// for that long (duty: the busy share of each 100 ms), synchronizes and
// prints "done".
const gpuLoad = `
import sys, time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = a @ a
torch.cuda.synchronize()
print("ready", flush=True)
for line in sys.stdin:
    _, secs, duty = line.split()
    end = time.time() + float(secs)
    while time.time() < end:
        busy_until = min(end, time.time() + 0.1 * float(duty))
        while time.time() < busy_until:
            for _ in range(8):
                b = a @ a
            torch.cuda.synchronize()
        rest = min(end, time.time() + 0.1 * (1 - float(duty))) - time.time()
        if rest > 0:
            time.sleep(rest)
    torch.cuda.synchronize()
    print("done", flush=True)
`

// counterRead is GPU 0's energy counter read by this process, stamped
// halfway through the call as the sidecar stamps its own reads.
type counterRead struct {
	at time.Time
	mj uint64
}

// realRun is one build run of TestGPUCostOnRealGPU: idle, loaded and idle
// again for these durations, named by its build.engine.
type realRun struct {
	engine            string
	before, load, end time.Duration
	duty              float64
}

// TestGPUCostOnRealGPU (make gpu-smoke; needs python3 with PyTorch) runs
// the built distribution on the shipped configuration (sampling every 1 s)
// beside a real GPU load, and a service whose runs of 10 s or more place
// the load inside them, at their very edges, at half duty, or not at all.
// Each run's build.gpu.energy is checked against GPU 0's energy counter
// read by this test (another NVML client) at the run's start and end: within
// 2 %. nvidia-smi (R580) has no query field for the counter, so the
// driver's counter is read directly. The gpu_build stage's energy is
// checked the same way; the busy time against the load's seconds (within
// 10 % + 0.5 s); the peak memory against nvidia-smi's figure for the
// load's process; on GPUs with GPM the SM and tensor activity against
// nvidia-smi dmon's GPM reading under full load times the run's busy share
// (within 0.1).
func TestGPUCostOnRealGPU(t *testing.T) {
	root := binarytest.RepoRoot()
	dir := t.TempDir()

	lib := nvml.New()
	require.Equal(t, nvml.SUCCESS, lib.Init(), "NVML")
	t.Cleanup(func() { lib.Shutdown() })
	dev, ret := lib.DeviceGetHandleByIndex(0)
	require.Equal(t, nvml.SUCCESS, ret)
	uuid, _ := dev.GetUUID()
	read := func() counterRead {
		t0 := time.Now()
		mj, ret := dev.GetTotalEnergyConsumption()
		t1 := time.Now()
		require.Equal(t, nvml.SUCCESS, ret, "the energy counter")
		return counterRead{t0.Add(t1.Sub(t0) / 2), mj}
	}

	load := exec.Command("python3", "-u", "-c", gpuLoad)
	stdin, err := load.StdinPipe()
	require.NoError(t, err)
	stdout, err := load.StdoutPipe()
	require.NoError(t, err)
	var loadErr strings.Builder
	load.Stderr = &loadErr
	require.NoError(t, load.Start(), "python3 with PyTorch runs the GPU load")
	t.Cleanup(func() { _ = stdin.Close(); _ = load.Wait() })
	lines := bufio.NewScanner(stdout)
	await := func(want string) {
		require.True(t, lines.Scan(), "the GPU load ended: %s", loadErr.String())
		require.Equal(t, want, lines.Text())
	}
	await("ready")

	cw, err := cloudwatchtest.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = cw.Close() })
	httpPort := binarytest.FreePort(t)
	env := sidecarEnv(t, cw, dir, "GPUBUILD_FLUSH_INTERVAL=2s", "GPUBUILD_OTLP_HTTP_PORT="+strconv.Itoa(httpPort))
	col := binarytest.StartBinary(t, env, "--config", filepath.Join(root, "otelcol-config.yaml"))
	t.Cleanup(func() {
		// A crash's cause is at the head of its dump, which the tail the
		// harness logs leaves out.
		out := col.Output.String()
		for _, mark := range []string{"fatal error:", "panic:", "SIGSEGV", "SIGABRT"} {
			if i := strings.Index(out, mark); i >= 0 {
				t.Logf("collector crashed:\n%s", out[max(0, i-2000):min(len(out), i+6000)])
				return
			}
		}
	})
	require.True(t, binarytest.Eventually(30*time.Second, func() bool {
		return col.Exited() || containsAll(col.Output.String(), "sampling GPUs", "Everything is ready")
	}), "the sidecar did not start sampling:\n%s", col.Output.String())
	require.False(t, col.Exited(), "collector exited: %v\n%s", col.Err(), col.Output.String())

	ctx := context.Background()
	svc := startBuildService(t, httpPort, resource.NewSchemaless(attribute.String("service.name", "vector-index-build"),
		attribute.String("service.instance.id", "pod-real-gpu"), attribute.Int("process.pid", load.Process.Pid)))
	status := func(id, engine, st string, at time.Time) {
		svc.status(id, st, at, attribute.String("build.engine", engine), attribute.String("build.data_type", "float"))
	}
	// The workload's timeline is wall time: the sidecar's samples must
	// reach back before the first run, and each run lasts what it says.
	time.Sleep(2 * time.Second)

	dmon := startDmon(t)
	runs := []realRun{
		{"load-inside", 2 * time.Second, 8 * time.Second, 2 * time.Second, 1},
		{"load-at-the-edges", 0, 10 * time.Second, 0, 1},
		{"half-duty", 3 * time.Second, 8 * time.Second, 3 * time.Second, 0.5},
		{"idle", 5 * time.Second, 0, 5 * time.Second, 1},
	}
	type truth struct {
		run, stage   [2]counterRead
		loadSeconds  float64
		duty         float64
		smiMemoryMiB float64
	}
	truths := map[string]truth{}
	for i, r := range runs {
		id := fmt.Sprintf("real-%d", i)
		var tr truth
		tr.run[0] = read()
		status(id, r.engine, "RUNNING_INDEX_BUILD", tr.run[0].at)
		time.Sleep(r.before)
		tr.stage[0] = read()
		if r.load > 0 {
			_, err := fmt.Fprintf(stdin, "busy %.3f %.2f\n", r.load.Seconds(), r.duty)
			require.NoError(t, err)
			if r.load > 2*time.Second {
				time.Sleep(r.load / 2)
				tr.smiMemoryMiB = smiProcessMemoryMiB(t, load.Process.Pid)
			}
			await("done")
		}
		tr.stage[1] = read()
		time.Sleep(r.end)
		tr.run[1] = read()
		tr.loadSeconds, tr.duty = r.load.Seconds(), r.duty
		if r.load > 0 {
			_, span := svc.tracer.Start(ctx, "gpu_build", trace.WithTimestamp(tr.stage[0].at),
				trace.WithAttributes(attribute.String("build.job.id", id), attribute.String("build.stage", "gpu_build"),
					attribute.String("build.stage.result", "success"), attribute.String("hw.id", uuid),
					attribute.String("build.engine", r.engine), attribute.String("build.data_type", "float")))
			span.End(trace.WithTimestamp(tr.stage[1].at))
		}
		status(id, r.engine, "COMPLETED_INDEX_BUILD", tr.run[1].at)
		truths[r.engine] = tr
	}

	value := func(metric, engine string) (float64, bool) {
		for _, d := range cw.Datums() {
			if d.MetricName != metric || d.Dimensions["build.engine"] != engine ||
				(strings.HasPrefix(metric, "build.stage.") && d.Dimensions["build.stage"] != "gpu_build") {
				continue
			}
			if v := runValues(d); len(v) == 1 {
				return v[0], true
			}
		}
		return 0, false
	}
	for _, r := range runs {
		tr := truths[r.engine]
		runJ := float64(tr.run[1].mj-tr.run[0].mj) / 1000
		stageJ := float64(tr.stage[1].mj-tr.stage[0].mj) / 1000
		for _, c := range []struct {
			metric string
			want   float64
		}{{"build.gpu.energy", runJ}, {"build.stage.gpu.energy", stageJ}} {
			if c.metric == "build.stage.gpu.energy" && r.load == 0 {
				continue
			}
			var got float64
			ok := binarytest.Eventually(30*time.Second, func() bool {
				var found bool
				got, found = value(c.metric, r.engine)
				return found || col.Exited()
			})
			require.True(t, ok, "%s: no %s datum within 30 s:\n%s", r.engine, c.metric, col.Output.String())
			rel := (got - c.want) / c.want
			t.Logf("%-18s %-24s sidecar %9.1f J  counter %9.1f J  (%+.2f %%)", r.engine, c.metric, got, c.want, rel*100)
			if c.metric == "build.gpu.energy" || r.load >= 10*time.Second {
				assert.LessOrEqual(t, math.Abs(rel), 0.02, "%s %s: within 2 %% of the driver's counter", r.engine, c.metric)
			}
		}
		// dmon stamps its readings to the second, so its mean over a run
		// whose edges are idle is off by up to a second's worth. Its
		// reading of a fully loaded second (the run loaded to its edges)
		// is the reference: a run's activity is that times its busy share.
		edges := truths["load-at-the-edges"]
		runSeconds := tr.run[1].at.Sub(tr.run[0].at).Seconds()
		for _, a := range []struct {
			metric, column string
		}{{"build.gpu.sm_activity", "smutil"}, {"build.gpu.tensor_activity", "mmaact"}} {
			got, ok := value(a.metric, r.engine)
			full, n := dmon.mean(a.column, edges.run[0].at, edges.run[1].at)
			want := full * tr.loadSeconds * tr.duty / runSeconds
			t.Logf("%-18s %-24s sidecar %9.3f    nvidia-smi dmon under full load %.3f (%d readings) x busy share %.3f = %.3f",
				r.engine, a.metric, got, full, n, tr.loadSeconds*tr.duty/runSeconds, want)
			if !ok {
				t.Logf("%s: no %s datum (no GPM on this GPU: see otelcol_buildjob_gpu_figures_skipped)", r.engine, a.metric)
				continue
			}
			if n >= 5 {
				assert.InDelta(t, want, got, 0.1, "%s %s against nvidia-smi dmon's GPM %s", r.engine, a.metric, a.column)
			}
		}
		busy, ok := value("build.gpu.busy_time", r.engine)
		require.True(t, ok, "%s: no busy time", r.engine)
		wantBusy := tr.loadSeconds * tr.duty
		t.Logf("%-18s build.gpu.busy_time      sidecar %9.2f s  load %6.2f s busy", r.engine, busy, wantBusy)
		assert.InDelta(t, wantBusy, busy, 0.1*wantBusy+0.5, "%s busy time", r.engine)
		peak, ok := value("build.gpu.memory.peak", r.engine)
		require.True(t, ok, "%s: no peak memory", r.engine)
		t.Logf("%-18s build.gpu.memory.peak    sidecar %9.1f MiB  nvidia-smi %6.0f MiB", r.engine, peak/(1<<20), tr.smiMemoryMiB)
		if tr.smiMemoryMiB > 0 {
			assert.InDelta(t, tr.smiMemoryMiB, peak/(1<<20), 2, "%s peak memory against nvidia-smi", r.engine)
		}
	}
}

// dmonReadings is nvidia-smi dmon's GPM columns for GPU 0, one reading a
// second, each the figure of the second that ends at its time stamp.
type dmonReadings struct {
	mu      sync.Mutex
	columns []string
	rows    []dmonRow
}

type dmonRow struct {
	at     time.Time
	values []string
}

// startDmon runs nvidia-smi dmon with the GPM SM activity (2) and
// any-tensor activity (5) of GPU 0 for the rest of the test.
func startDmon(t *testing.T) *dmonReadings {
	d := &dmonReadings{}
	cmd := exec.Command("nvidia-smi", "dmon", "-i", "0", "-s", "p", "--gpm-metrics", "2,5", "-o", "T")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	go func() {
		lines := bufio.NewScanner(out)
		for lines.Scan() {
			f := strings.Fields(strings.TrimPrefix(lines.Text(), "#"))
			d.mu.Lock()
			switch {
			case d.columns == nil && slices.Contains(f, "smutil"):
				d.columns = f
			case d.columns != nil && len(f) == len(d.columns) && !strings.HasPrefix(lines.Text(), "#"):
				if at, err := time.ParseInLocation("15:04:05", f[0], time.Local); err == nil {
					now := time.Now()
					at = time.Date(now.Year(), now.Month(), now.Day(), at.Hour(), at.Minute(), at.Second(), 0, time.Local)
					d.rows = append(d.rows, dmonRow{at, f})
				}
			}
			d.mu.Unlock()
		}
	}()
	return d
}

// mean is the mean of column over the readings whose second lies inside
// [from, to], as a fraction; n is how many there were.
func (d *dmonReadings) mean(column string, from, to time.Time) (float64, int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	i := slices.Index(d.columns, column)
	if i < 0 {
		return 0, 0
	}
	var sum float64
	n := 0
	for _, r := range d.rows {
		if r.at.Add(-time.Second).Before(from) || r.at.After(to) {
			continue
		}
		if v, err := strconv.ParseFloat(r.values[i], 64); err == nil {
			sum += v / 100
			n++
		}
	}
	if n == 0 {
		return 0, 0
	}
	return sum / float64(n), n
}

// smiProcessMemoryMiB is nvidia-smi's used_memory of pid, MiB.
func smiProcessMemoryMiB(t *testing.T, pid int) float64 {
	out, err := exec.Command("nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits").Output()
	require.NoError(t, err)
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, ",")
		if len(f) == 2 && strings.TrimSpace(f[0]) == strconv.Itoa(pid) {
			v, err := strconv.ParseFloat(strings.TrimSpace(f[1]), 64)
			require.NoError(t, err)
			return v
		}
	}
	t.Fatalf("nvidia-smi lists no process %d:\n%s", pid, out)
	return 0
}
