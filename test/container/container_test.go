// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package container

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/buildsim"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/exact"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/podmantest"
	"github.com/gpubuild/otelcol-gpubuild/receiver/nvmlreceiver/fakenvml"
)

// composeGrace is the sidecar's stop_grace_period in
// deploy/docker-compose.yaml: how long the runtime waits after SIGTERM
// before SIGKILL.
func composeGrace(t testing.TB) time.Duration {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(binarytest.RepoRoot(), "deploy", "docker-compose.yaml"))
	require.NoError(t, err)
	var compose struct {
		Services map[string]struct {
			StopGracePeriod string `yaml:"stop_grace_period"`
		} `yaml:"services"`
	}
	require.NoError(t, yaml.Unmarshal(b, &compose))
	grace, err := time.ParseDuration(compose.Services["otelcol-gpubuild"].StopGracePeriod)
	require.NoError(t, err, "stop_grace_period of otelcol-gpubuild")
	return grace
}

// TestContainerImage checks what the image is, before running it: the
// binaries `make build` made (not stale ones), its own non-root user, the
// HEALTHCHECK kept (docker format), no shell, and its size within the two
// binaries plus 25 MB.
func TestContainerImage(t *testing.T) {
	image := imageName(t)
	var inspected []struct {
		Config struct {
			User       string
			Entrypoint []string
			Volumes    map[string]struct{}
		}
		// podman reports the docker-format HEALTHCHECK beside Config.
		Healthcheck struct{ Test []string }
		Size        int64
	}
	out := podmantest.Must(t, "image", "inspect", image)
	require.NoError(t, json.Unmarshal([]byte(out), &inspected), out)
	require.Len(t, inspected, 1)
	cfg := inspected[0]
	assert.Equal(t, "65532:65532", cfg.Config.User)
	assert.Equal(t, []string{"/usr/local/bin/otelcol-gpubuild"}, cfg.Config.Entrypoint)
	assert.Equal(t, []string{"CMD", "/usr/local/bin/healthprobe"}, cfg.Healthcheck.Test)
	assert.Contains(t, cfg.Config.Volumes, queueDir)

	// The binaries inside are the ones in bin/, byte for byte.
	name := podmantest.UniqueName(t, "inspect")
	podmantest.Must(t, "create", "--name", name, image)
	t.Cleanup(func() { _, _ = podmantest.Run(context.Background(), "rm", "--force", "--volumes", name) })
	dir := t.TempDir()
	var binaries int64
	for _, bin := range []string{"otelcol-gpubuild", "healthprobe"} {
		podmantest.Must(t, "cp", name+":/usr/local/bin/"+bin, filepath.Join(dir, bin))
		inImage, err := os.ReadFile(filepath.Join(dir, bin))
		require.NoError(t, err)
		built, err := os.ReadFile(filepath.Join(binarytest.RepoRoot(), "bin", bin))
		require.NoError(t, err)
		assert.Equal(t, sha256.Sum256(built), sha256.Sum256(inImage), "%s in the image differs from bin/%s: run make image", bin, bin)
		binaries += int64(len(built))
	}

	// Distroless: nothing to run but the binaries.
	_, err := podmantest.Run(context.Background(), "run", "--rm", "--entrypoint", "/bin/sh", image, "-c", "true")
	require.Error(t, err, "the image has a shell")

	const budget = 25_000_000
	t.Logf("image %d bytes: binaries %d + %d", cfg.Size, binaries, cfg.Size-binaries)
	assert.LessOrEqual(t, cfg.Size, binaries+budget, "image size: at most the two binaries plus 25 MB")
}

// TestContainerDelivers runs the image as deployed (read-only, its own user,
// the queue on a named volume): the HEALTHCHECK passes, the process runs as
// 65532, OTLP over gRPC and HTTP from the host lands at the CloudWatch
// endpoint exactly, the queue and state files are on the volume and the
// user's, and `podman stop` (SIGTERM) ends it with status 0 within the
// grace period.
func TestContainerDelivers(t *testing.T) {
	w := newWorld(t)
	vol := newVolume(t)
	c := w.start(runOpts{volume: vol})
	c.awaitHealthy()

	st := c.state()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", st.Pid))
	require.NoError(t, err)
	assert.Regexp(t, `(?m)^Uid:\s+65532\s+65532\s+65532\s+65532$`, string(status), "the collector's user")
	assert.Regexp(t, `(?m)^Gid:\s+65532\s+65532\s+65532\s+65532$`, string(status), "the collector's group")
	assert.Equal(t, "true", strings.TrimSpace(podmantest.Must(t, "inspect", "--format", "{{.HostConfig.ReadonlyRootfs}}", c.name)))

	grpc := w.sim("container-grpc", buildsim.ProtocolGRPC, 60, 11)
	http := w.sim("container-http", buildsim.ProtocolHTTP, 40, 12)
	w.awaitExact(90*time.Second, grpc, http)

	// The queue and the derived state live on the volume, owned by the
	// container's user (the image's queue directory is copied into a new
	// volume with its owner).
	mount := strings.TrimSpace(podmantest.Must(t, "volume", "inspect", "--format", "{{.Mountpoint}}", vol))
	// The volume's directory is root's: list it as root.
	out, err := podmantest.AsRoot(context.Background(), "find", mount, "-printf", "%U %P\n").Output()
	require.NoError(t, err)
	files := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.Greater(t, len(files), 1, "nothing on the queue volume")
	for _, f := range files {
		owner, path, _ := strings.Cut(f, " ")
		assert.Equal(t, "65532", owner, "owner of %q on the volume", "/"+path)
	}

	grace := composeGrace(t)
	took, code := c.stop(grace)
	t.Logf("podman stop: exit %d after %v (grace %v)", code, took.Round(time.Millisecond), grace)
	assert.Equal(t, 0, code, "exit status after SIGTERM")
	assert.Less(t, took, grace, "SIGTERM to exit")
	assert.Contains(t, c.logs(), "Shutdown complete")
	// Nothing more was sent at shutdown than before.
	require.Empty(t, append(exact.Mismatches(w.cw.Datums(), grpc), exact.Mismatches(w.cw.Datums(), http)...))
}

// TestContainerStopWhileCloudWatchHangs stops the container (SIGTERM, the
// compose file's grace period) while CloudWatch takes every request and
// never answers, at the worst moment: the drain gives up just after the
// first request's retry went out, so the sidecar awaits that request (up to
// request_timeout) and then exporterhelper's last batch flush (one more),
// about 50 s (the bare binary's 52.9 s, past the former 45 s grace). It
// exits 0 before the runtime would SIGKILL it, leaving the rest on the
// volume; a new container on the same volume then sends everything, once.
func TestContainerStopWhileCloudWatchHangs(t *testing.T) {
	times := shippedShutdownTimes(t)
	w := newWorld(t)
	vol := newVolume(t)
	c := w.start(runOpts{volume: vol})
	c.awaitHealthy()
	w.cw.SetFaults(cloudwatchtest.Faults{Latency: time.Hour})
	// When the first PutMetricData request reaches CloudWatch (and hangs).
	firstRequest := make(chan time.Time, 1)
	go func() {
		if binarytest.Eventually(2*time.Minute, func() bool { return w.cw.Stats().Requests > 0 }) {
			firstRequest <- time.Now()
		}
		close(firstRequest)
	}()
	sent := w.sim("container-hang", buildsim.ProtocolGRPC, 60, 21)
	first, ok := <-firstRequest
	require.True(t, ok, "no PutMetricData request reached CloudWatch")
	// That request times out after request_timeout and is retried within
	// 1.5 initial intervals (configretry's randomization 0.5): SIGTERM so
	// that the drain (which starts right after it) gives up just after.
	sigterm := first.Add(times.request + times.retryInitial*3/2 - times.drain)
	time.Sleep(time.Until(sigterm)) // the moment is the scenario, not a condition awaited

	grace := composeGrace(t)
	took, code := c.stop(grace)
	t.Logf("podman stop while CloudWatch hangs, %v after its first request: exit %d after %v (grace %v; worst case %v)",
		sigterm.Sub(first).Round(time.Millisecond), code, took.Round(time.Millisecond), grace, times.worst())
	assert.Equal(t, 0, code, "exit status after SIGTERM (137: SIGKILLed at the end of the grace period)")
	assert.Less(t, took, grace, "SIGTERM to exit while CloudWatch hangs")
	require.Empty(t, w.cw.Datums(), "CloudWatch stored nothing while it hung")

	w.cw.SetFaults(cloudwatchtest.Faults{})
	next := w.start(runOpts{volume: vol})
	next.awaitHealthy()
	w.awaitExact(90*time.Second, sent)
}

// TestContainerKillRestart kills the container without warning (podman kill,
// SIGKILL) after its first deliveries and starts a new one on the same
// volume: what was queued or derived but not yet sent is sent once, the
// service's cumulative counters go on from what was already sent.
func TestContainerKillRestart(t *testing.T) {
	w := newWorld(t)
	vol := newVolume(t)
	c := w.start(runOpts{volume: vol})
	c.awaitHealthy()
	first := w.sim("container-kill", buildsim.ProtocolGRPC, 60, 31)
	require.True(t, binarytest.Eventually(60*time.Second, func() bool {
		return exact.Sum(w.cw.Datums(), "build.jobs", map[string]string{"service.name": first.Service}) > 0
	}), "no build.jobs landed before the kill")
	c.kill()
	require.Equal(t, 137, c.state().ExitCode, "SIGKILL's exit status")

	next := w.start(runOpts{volume: vol})
	next.awaitHealthy()
	second := w.sim("container-kill-after", buildsim.ProtocolHTTP, 40, 32)
	w.awaitExact(90*time.Second, first, second)
}

// TestContainerFakeNVML mounts a fake libnvidia-ml.so.1 where the NVIDIA
// container toolkit injects the real one, a single read-only file under
// /usr/lib/x86_64-linux-gnu: the image's glibc finds it by name, and the
// GPU gauges reach CloudWatch with the values the fake driver reports.
func TestContainerFakeNVML(t *testing.T) {
	w := newWorld(t)
	dir := t.TempDir()
	lib, err := fakenvml.Build(dir, binarytest.RepoRoot())
	require.NoError(t, err)
	sc := fakenvml.Scenario{Driver: "535.161.08"}
	for i := range 2 {
		sc.GPUs = append(sc.GPUs, fakenvml.GPU{
			UUID: fmt.Sprintf("GPU-c0a7a1e0-0000-4000-8000-00000000000%d", i), Name: "NVIDIA A10G",
			BusID:    fmt.Sprintf("00000000:%02X:00.0", 0x1e+i),
			MemTotal: 24 << 30, MemUsed: uint64(i+1) << 30, MemReserved: 256 << 20,
			Temperature: 40 + uint32(i), PowerMW: 150_250 + 1_000*uint32(i), PowerLimitMW: 300_000, EnergyMJ: 1_000_000,
			ClockSM: 1710, ClockMem: 6251, ClockGraphics: 1710,
			UtilGPU: 37 + uint32(i), UtilMem: 12,
		})
	}
	scenario := filepath.Join(dir, "scenario.txt")
	require.NoError(t, sc.WriteFile(scenario))
	// The container's user reads them through the bind mounts.
	for _, f := range []string{lib, scenario} {
		require.NoError(t, os.Chmod(f, 0o644))
	}
	c := w.start(runOpts{volume: newVolume(t), extraArgs: []string{
		"--volume", lib + ":/usr/lib/x86_64-linux-gnu/" + fakenvml.LibraryName + ":ro",
		"--volume", scenario + ":/etc/fakenvml/scenario.txt:ro",
		"--env", fakenvml.EnvScenario + "=/etc/fakenvml/scenario.txt",
		"--env", "GPUBUILD_GPU_COLLECTION_INTERVAL=1s",
	}})
	c.awaitHealthy()

	type want struct {
		metric string
		gpu    int
		value  float64
	}
	var wants []want
	for i, g := range sc.GPUs {
		wants = append(wants,
			want{"hw.gpu.utilization", i, float64(g.UtilGPU) / 100},
			want{"hw.temperature", i, float64(g.Temperature)},
			want{"hw.power", i, float64(g.PowerMW) / 1000},
		)
	}
	found := func(wt want) bool {
		for _, d := range w.cw.Datums() {
			if d.MetricName == wt.metric && d.Value != nil && d.Dimensions["hw.id"] == sc.GPUs[wt.gpu].UUID &&
				d.Dimensions["gpu.index"] == strconv.Itoa(wt.gpu) && math.Abs(*d.Value-wt.value) < 1e-9 {
				return true
			}
		}
		return false
	}
	deadline := time.Now().Add(90 * time.Second)
	for _, wt := range wants {
		ok := binarytest.Eventually(time.Until(deadline), func() bool { return found(wt) || !c.state().Running })
		require.True(t, c.state().Running, "container exited")
		require.True(t, ok, "no %s datum for GPU %d with value %v within 90 s", wt.metric, wt.gpu, wt.value)
	}
	assert.Contains(t, c.logs(), "NVML loaded")
}
