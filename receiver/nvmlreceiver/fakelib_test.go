// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlreceiver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpubuild/otelcol-gpubuild/internal/nvmlapi"
	"github.com/gpubuild/otelcol-gpubuild/receiver/nvmlreceiver/fakenvml"
)

// Metric names as the receiver emits them, in one place.
const (
	mUtilization    = "hw.gpu.utilization"
	mMemController  = "gpu.memory.controller.utilization"
	mMemUtilization = "hw.gpu.memory.utilization"
	mMemUsage       = "hw.gpu.memory.usage"
	mMemReserved    = "gpu.memory.reserved"
	mMemLimit       = "hw.gpu.memory.limit"
	mTemperature    = "hw.temperature"
	mPower          = "hw.power"
	mPowerLimit     = "gpu.power.limit"
	mEnergy         = "hw.energy"
	mClock          = "gpu.clock.frequency"
	mECC            = "hw.errors"
	mThrottled      = "gpu.clock.throttled"
	mPCIe           = "gpu.pcie.throughput"
	mXID            = "gpu.xid.errors"
	mProcMemory     = "gpu.process.memory.usage"
	mProcUtil       = "gpu.process.utilization"
)

const fakeDriver = "550.54.15"

// throttleNames are NVML's clocks event reason bits and their attribute values.
var throttleNames = []struct {
	bit  uint64
	name string
}{
	{nvml.ClocksEventReasonGpuIdle, "gpu_idle"},
	{nvml.ClocksEventReasonSwPowerCap, "sw_power_cap"},
	{nvml.ClocksThrottleReasonHwSlowdown, "hw_slowdown"},
}

// fleetScenario is 8 GPUs: samples and processes on GPU 0, a process on
// GPU 1, MIG on GPU 3, power and ECC NOT_SUPPORTED on GPU 5. Each GPU's
// values differ so a value landing on the wrong GPU shows.
func fleetScenario(n int) fakenvml.Scenario {
	sc := fakenvml.Scenario{Driver: fakeDriver}
	for i := range n {
		u := uint32(i)
		g := fakenvml.GPU{
			UUID: fmt.Sprintf("GPU-fa4e0000-0000-4000-8000-00000000000%d", i),
			Name: "NVIDIA H100 80GB HBM3", BusID: fmt.Sprintf("00000000:%02X:00.0", 0x18+i),
			MemTotal: 80 << 30, MemUsed: uint64(i+1) << 30, MemReserved: 512 << 20,
			Temperature: 30 + u, PowerMW: 100_000 + 1_234*u, PowerLimitMW: 700_000, EnergyMJ: 1_000_000_000 + 12_345*uint64(i),
			ClockSM: 1980 - u, ClockMem: 2619, ClockGraphics: 1755 + u,
			ECCCorrected: uint64(i), ECCUncorrected: uint64(i % 2),
			ThrottleSupported: nvml.ClocksEventReasonGpuIdle | nvml.ClocksEventReasonSwPowerCap | nvml.ClocksThrottleReasonHwSlowdown,
			PCIeTXKiB:         1000 + u, PCIeRXKiB: 2000 + u,
			UtilGPU: 77, UtilMem: 33,
			GPUSamples: []fakenvml.Sample{{TimestampUs: 1_100_000, Percent: 10 + u}, {TimestampUs: 1_600_000, Percent: 20 + u}, {TimestampUs: 2_500_000, Percent: 50}, {TimestampUs: 3_500_000, Percent: 70}, {TimestampUs: 4_200_000, Percent: 40}, {TimestampUs: 4_600_000, Percent: 90}},
			MemSamples: []fakenvml.Sample{{TimestampUs: 1_200_000, Percent: 5}, {TimestampUs: 3_200_000, Percent: 15 + u}},
		}
		if i%2 == 1 {
			g.ThrottleCurrent = nvml.ClocksEventReasonSwPowerCap
		}
		switch i {
		case 0:
			g.Processes = []fakenvml.Process{{PID: 4242, UsedBytes: 3 << 30}, {PID: 4243, UsedBytes: 1 << 30}}
			g.ProcessSamples = []fakenvml.ProcessSample{{PID: 4242, TimestampUs: 1_500_000, SMPercent: 60}, {PID: 4242, TimestampUs: 3_000_000, SMPercent: 80}, {PID: 4243, TimestampUs: 3_100_000, SMPercent: 10}}
		case 1:
			g.Processes = []fakenvml.Process{{PID: 5151, UsedBytes: 2 << 30}}
		case 3:
			g.MIGMode = true
			g.MIG = []fakenvml.MIGDevice{
				{Slot: 0, UUID: "MIG-aaaa0000-0000-4000-8000-000000000001", GPUInstanceID: 1, ComputeID: 0, MemTotal: 10 << 30, MemUsed: 1 << 30, Processes: []fakenvml.Process{{PID: 6161, UsedBytes: 512 << 20}}},
				{Slot: 2, UUID: "MIG-bbbb0000-0000-4000-8000-000000000002", GPUInstanceID: 2, ComputeID: 0, MemTotal: 20 << 30, MemUsed: 3 << 30, MemReserv: 64 << 20},
			}
		case 5:
			g.PowerUnsupported, g.ECCUnsupported = true, true
		}
		sc.GPUs = append(sc.GPUs, g)
	}
	return sc
}

// procEntry is what /proc says about a PID in the tests.
func procEntry(pid uint32) (comm, cgroup, containerID string) {
	comm = fmt.Sprintf("worker%d", pid)
	if pid%2 == 0 {
		containerID = strings.Repeat(fmt.Sprintf("%08x", pid), 8)
		return comm, "0::/system.slice/docker-" + containerID + ".scope\n", containerID
	}
	return comm, "0::/user.slice/user-1000.slice\n", ""
}

type childResult struct {
	scrapes []childScrape
	logs    []map[string]any
	err     error // exit status of the child
	stderr  string
	report  string // what the fake's last nvmlShutdown wrote (fakenvml.EnvReport)
}

// runFake builds the fake library with defines, writes the scenario and
// /proc entries, and runs the script in a child process that finds the
// library through LD_LIBRARY_PATH.
func runFake(t *testing.T, sc fakenvml.Scenario, script childScript, defines ...string) childResult {
	t.Helper()
	dir := t.TempDir()
	wd, err := os.Getwd()
	require.NoError(t, err)
	libDir := filepath.Join(dir, "lib")
	require.NoError(t, os.Mkdir(libDir, 0o700))
	_, err = fakenvml.Build(libDir, wd, defines...)
	require.NoError(t, err, "compiling the fake NVML")
	scenarioPath := filepath.Join(dir, "scenario.txt")
	require.NoError(t, sc.WriteFile(scenarioPath))

	script.OutDir = filepath.Join(dir, "out")
	script.ProcDir = filepath.Join(dir, "proc")
	script.StateFile = filepath.Join(dir, "state.txt")
	require.NoError(t, os.Mkdir(script.OutDir, 0o700))
	for _, g := range sc.GPUs {
		pids := []fakenvml.Process{}
		pids = append(pids, g.Processes...)
		for _, m := range g.MIG {
			pids = append(pids, m.Processes...)
		}
		for _, p := range pids {
			comm, cgroup, _ := procEntry(p.PID)
			pd := filepath.Join(script.ProcDir, strconv.Itoa(int(p.PID)))
			require.NoError(t, os.MkdirAll(pd, 0o700))
			require.NoError(t, os.WriteFile(filepath.Join(pd, "comm"), []byte(comm+"\n"), 0o600))
			require.NoError(t, os.WriteFile(filepath.Join(pd, "cgroup"), []byte(cgroup), 0o600))
		}
	}
	require.NoError(t, os.MkdirAll(script.ProcDir, 0o700))
	scriptPath := filepath.Join(dir, "script.json")
	b, err := json.Marshal(script)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(scriptPath, b, 0o600))

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		childScriptEnv+"="+scriptPath,
		"LD_LIBRARY_PATH="+libDir,
		fakenvml.EnvScenario+"="+scenarioPath,
		fakenvml.EnvState+"="+script.StateFile,
		fakenvml.EnvReport+"="+filepath.Join(script.OutDir, "report.txt"),
	)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	res := childResult{err: cmd.Run(), stderr: stderr.String()}
	if b, err := os.ReadFile(filepath.Join(script.OutDir, "report.txt")); err == nil {
		res.report = string(b)
	}
	for i := range script.Steps {
		raw, err := os.ReadFile(filepath.Join(script.OutDir, fmt.Sprintf("scrape-%d.json", i)))
		if err != nil {
			break
		}
		var s childScrape
		require.NoError(t, json.Unmarshal(raw, &s))
		res.scrapes = append(res.scrapes, s)
	}
	if f, err := os.Open(filepath.Join(script.OutDir, "log.json")); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var e map[string]any
			require.NoError(t, json.Unmarshal(sc.Bytes(), &e))
			res.logs = append(res.logs, e)
		}
	}
	return res
}

func (r childResult) metrics(t *testing.T, i int) pmetric.Metrics {
	t.Helper()
	require.Greater(t, len(r.scrapes), i, "scrape %d missing; child: %v\n%s", i, r.err, r.stderr)
	var u pmetric.JSONUnmarshaler
	md, err := u.UnmarshalMetrics(r.scrapes[i].Metrics)
	require.NoError(t, err)
	return md
}

func (r childResult) logsWith(prefix string) []map[string]any {
	var out []map[string]any
	for _, e := range r.logs {
		if msg, _ := e["msg"].(string); strings.HasPrefix(msg, prefix) {
			out = append(out, e)
		}
	}
	return out
}

// requireExact fails with every difference between truth and output.
func requireExact(t *testing.T, label string, want, got map[string]float64) {
	t.Helper()
	if d := diffPoints(want, got); len(d) > 0 {
		t.Fatalf("%s: %d differences from the scenario's truth:\n%s", label, len(d), strings.Join(d, "\n"))
	}
}

// fleetSteps: two scrapes over sample windows, GPU 6 lost, GPU 6 back a
// retry interval later, then XIDs on GPU 2 and on GPU 6's new handle.
func fleetSteps() []childStep {
	xids := []fakenvml.XID{{GPU: 2, Code: 79}, {GPU: 6, Code: 48}, {GPU: 2, Code: 79}}
	return []childStep{
		{State: fakenvml.State{ClockUs: 2_000_000}, Advance: 10 * time.Second},
		{State: fakenvml.State{ClockUs: 4_000_000}, Advance: 10 * time.Second},
		{State: fakenvml.State{ClockUs: 4_400_000, Lost: []int{6}}, Advance: 10 * time.Second},
		{State: fakenvml.State{ClockUs: 4_400_000}, Advance: 10 * time.Second}, // back, but not yet retried
		{State: fakenvml.State{ClockUs: 5_000_000}, Advance: time.Minute},
		{State: fakenvml.State{ClockUs: 5_000_000, XIDs: xids}, Advance: 10 * time.Second, AwaitXIDs: 3},
	}
}

// TestFakeNVMLFleet loads the fake NVML with 8 GPUs through the production
// loader and checks every point of every scrape against the scenario:
// utilization averaged over each interval, processes, MIG, NOT_SUPPORTED
// power and ECC, a GPU lost and found again, XID events.
func TestFakeNVMLFleet(t *testing.T) {
	sc := fleetScenario(8)
	script := childScript{XIDEnabled: true, Steps: fleetSteps()}
	res := runFake(t, sc, script)
	require.NoError(t, res.err, "child process: %s", res.stderr)
	require.Len(t, res.scrapes, len(script.Steps))

	tr := newTruth(t, sc)
	for i, step := range script.Steps {
		want := tr.scrape(step, nvmlapi.DefaultInitRetryInterval)
		requireExact(t, fmt.Sprintf("scrape %d", i), want, flatten(t, res.metrics(t, i)))
	}

	// The loss is one partial scrape error naming the GPU, then silence
	// until it is back; other scrapes are clean.
	for i, s := range res.scrapes {
		if i == 2 {
			assert.Contains(t, s.Err, sc.GPUs[6].UUID)
			assert.Contains(t, s.Err, "ERROR_GPU_IS_LOST")
			assert.NotContains(t, s.Err, sc.GPUs[5].UUID)
			continue
		}
		assert.Empty(t, s.Err, "scrape %d", i)
	}
	assert.Len(t, res.logsWith("GPU is lost"), 1)
	assert.Len(t, res.logsWith("lost GPU is back"), 1)

	// NOT_SUPPORTED: logged once per feature for GPU 5 over six scrapes
	// (power, power limit, energy, ECC corrected, ECC uncorrected); MIG
	// mode on GPU 3 makes samples and rates unsupported there.
	byGPU := map[float64][]string{}
	for _, e := range res.logsWith("GPU does not support a metric") {
		byGPU[e["gpu.index"].(float64)] = append(byGPU[e["gpu.index"].(float64)], e["what"].(string))
	}
	assert.ElementsMatch(t, []string{featPower.String(), featPowerLimit.String(), featEnergy.String(),
		featECCCorrected.String(), featECCUncorrected.String()}, byGPU[5])
	assert.ElementsMatch(t, []string{featUtilSamples.String(), featMemUtilSamples.String(), featUtilization.String()}, byGPU[3])
	assert.Len(t, byGPU, 2, "only GPUs 3 and 5 lack features: %v", byGPU)
	assert.Empty(t, res.logsWith("the NVML library lacks"), "the full fake has every entry point")
}

// TestFakeNVMLNoGPU: a driver that loads and shows no GPU reports nothing,
// says so once, and keeps looking.
func TestFakeNVMLNoGPU(t *testing.T) {
	script := childScript{XIDEnabled: true, Steps: []childStep{{Advance: 10 * time.Second}, {Advance: time.Minute}}}
	res := runFake(t, fakenvml.Scenario{Driver: fakeDriver}, script)
	require.NoError(t, res.err, "child process: %s", res.stderr)
	for i := range script.Steps {
		assert.Equal(t, 0, res.metrics(t, i).DataPointCount())
		assert.Empty(t, res.scrapes[i].Err)
	}
	assert.Len(t, res.logsWith("NVML loaded but found no GPU"), 1)
	assert.Len(t, res.logsWith("NVML loaded"), 2) // "NVML loaded" and "NVML loaded but found no GPU"
}

// TestFakeNVMLOneGPUDriverWithoutV3 is a driver before R470: no
// nvmlDeviceGetComputeRunningProcesses_v3. go-nvml falls back to _v2 and
// every point still matches.
func TestFakeNVMLOneGPUDriverWithoutV3(t *testing.T) {
	sc := fleetScenario(1)
	steps := fleetSteps()[:2]
	res := runFake(t, sc, childScript{Steps: steps}, fakenvml.NoV3)
	require.NoError(t, res.err, "child process: %s", res.stderr)
	tr := newTruth(t, sc)
	for i, step := range steps {
		requireExact(t, fmt.Sprintf("scrape %d", i), tr.scrape(step, nvmlapi.DefaultInitRetryInterval), flatten(t, res.metrics(t, i)))
	}
	assert.Empty(t, res.logsWith("the NVML library lacks"))
}

// TestFakeNVMLSelfCheck shows the harness catches a broken library: a
// missing entry point and a wrong struct layout each make the comparison
// fail on exactly the affected metric, and the unguarded call the receiver
// avoids kills the process.
func TestFakeNVMLSelfCheck(t *testing.T) {
	sc := fleetScenario(2)
	steps := fleetSteps()[:1]

	t.Run("missing nvmlDeviceGetTemperature", func(t *testing.T) {
		res := runFake(t, sc, childScript{Steps: steps}, fakenvml.NoTemperature)
		require.NoError(t, res.err, "the receiver must survive a missing symbol: %s", res.stderr)
		diffs := diffPoints(newTruth(t, sc).scrape(steps[0], nvmlapi.DefaultInitRetryInterval), flatten(t, res.metrics(t, 0)))
		require.Len(t, diffs, 2, "%s", strings.Join(diffs, "\n"))
		for _, d := range diffs {
			assert.True(t, strings.HasPrefix(d, "missing ") && strings.Contains(d, " "+mTemperature+"[Cel]"), d)
		}
		warn := res.logsWith("the NVML library lacks some entry points")
		require.Len(t, warn, 1)
		assert.Equal(t, []any{"nvmlDeviceGetTemperature"}, warn[0]["missing"])
		assert.Len(t, res.logsWith("the NVML library lacks the entry point of a metric"), 2, "once per GPU")
	})

	t.Run("v1 process records in the v3 buffer", func(t *testing.T) {
		res := runFake(t, sc, childScript{Steps: steps}, fakenvml.WrongProcessLayout)
		require.NoError(t, res.err, "child process: %s", res.stderr)
		diffs := diffPoints(newTruth(t, sc).scrape(steps[0], nvmlapi.DefaultInitRetryInterval), flatten(t, res.metrics(t, 0)))
		require.NotEmpty(t, diffs)
		for _, d := range diffs {
			assert.True(t, strings.Contains(d, mProcMemory) || strings.Contains(d, mProcUtil), d)
		}
		t.Logf("the wrong layout shows as:\n%s", strings.Join(diffs, "\n"))
	})

	t.Run("unguarded call to a missing symbol", func(t *testing.T) {
		res := runFake(t, sc, childScript{Unguarded: true}, fakenvml.NoTemperature)
		var exit *exec.ExitError
		require.True(t, errors.As(res.err, &exit), "the child must die: %v %s", res.err, res.stderr)
		assert.Equal(t, 127, exit.ExitCode())
		assert.Contains(t, res.stderr, "undefined symbol: nvmlDeviceGetTemperature")
	})
}
