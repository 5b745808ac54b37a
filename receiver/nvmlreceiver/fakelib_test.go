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
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

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

// truth works out, scrape by scrape, what the receiver must report for a
// scenario: from the scenario and the script, never from receiver output.
type truth struct {
	sc       fakenvml.Scenario
	host     string
	now      time.Duration
	last     []uint64 // newest sample time a GPU's scrape consumed
	goneAt   []time.Duration
	gone     []bool
	xids     map[int]map[uint64]int
	xidsSeen int
}

func newTruth(t *testing.T, sc fakenvml.Scenario) *truth {
	host, err := os.Hostname()
	require.NoError(t, err)
	n := len(sc.GPUs)
	return &truth{sc: sc, host: host, last: make([]uint64, n), goneAt: make([]time.Duration, n), gone: make([]bool, n), xids: map[int]map[uint64]int{}}
}

func resourceKey(kv map[string]string) string {
	parts := make([]string, 0, len(kv))
	for k, v := range kv {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return "{" + strings.Join(parts, " ") + "}"
}

func pointKey(res, metric, unit string, attrs map[string]string) string {
	return res + " " + metric + "[" + unit + "]" + resourceKey(attrs)
}

func average(samples []fakenvml.Sample, after, upTo uint64) (float64, uint64, bool) {
	var sum float64
	var n int
	newest := after
	for _, s := range samples {
		if s.TimestampUs > after && s.TimestampUs <= upTo {
			sum += float64(s.Percent)
			n++
			newest = max(newest, s.TimestampUs)
		}
	}
	if n == 0 {
		return 0, after, false
	}
	return sum / float64(n), newest, true
}

// scrape returns the points of the next scrape after the state and clock
// of a step.
func (tr *truth) scrape(step childStep, retry time.Duration) map[string]float64 {
	tr.now += step.Advance
	clock := step.State.ClockUs
	if clock == 0 {
		clock = math.MaxUint64
	}
	for _, x := range step.State.XIDs[min(tr.xidsSeen, len(step.State.XIDs)):] {
		if tr.xids[x.GPU] == nil {
			tr.xids[x.GPU] = map[uint64]int{}
		}
		tr.xids[x.GPU][x.Code]++
	}
	tr.xidsSeen = max(tr.xidsSeen, len(step.State.XIDs))
	out := map[string]float64{}
	for i, g := range tr.sc.GPUs {
		if slices.Contains(step.State.Lost, i) {
			if !tr.gone[i] {
				tr.gone[i], tr.goneAt[i] = true, tr.now
			}
			continue
		}
		if tr.gone[i] {
			if tr.now-tr.goneAt[i] < retry {
				continue
			}
			tr.gone[i] = false
		}
		res := map[string]string{
			"hw.id": g.UUID, "hw.type": "gpu", "hw.vendor": "NVIDIA", "hw.model": g.Name, "hw.driver_version": tr.sc.Driver,
			"gpu.index": strconv.Itoa(i), "gpu.pci.bus_id": g.BusID, "host.name": tr.host,
		}
		rk := resourceKey(res)
		put := func(rk, metric, unit string, v float64, attrs ...string) {
			a := map[string]string{}
			for j := 0; j+1 < len(attrs); j += 2 {
				a[attrs[j]] = attrs[j+1]
			}
			out[pointKey(rk, metric, unit, a)] = v
		}
		prev := tr.last[i]
		if !g.MIGMode {
			util, newest, ok := average(g.GPUSamples, prev, clock)
			if !ok {
				util = float64(g.UtilGPU)
			}
			tr.last[i] = newest
			put(rk, mUtilization, "1", util/100, "hw.gpu.task", "general")
			mem, _, ok := average(g.MemSamples, prev, clock)
			if !ok {
				mem = float64(g.UtilMem)
			}
			put(rk, mMemController, "1", mem/100)
		}
		put(rk, mMemUsage, "By", float64(g.MemUsed))
		put(rk, mMemReserved, "By", float64(g.MemReserved))
		put(rk, mMemLimit, "By", float64(g.MemTotal))
		put(rk, mMemUtilization, "1", float64(g.MemUsed)/float64(g.MemTotal))
		put(rk, mTemperature, "Cel", float64(g.Temperature))
		if !g.PowerUnsupported {
			put(rk, mPower, "W", float64(g.PowerMW)/1000)
			put(rk, mPowerLimit, "W", float64(g.PowerLimitMW)/1000)
			put(rk, mEnergy, "J", float64(g.EnergyMJ)/1000)
		}
		put(rk, mClock, "Hz", float64(g.ClockSM)*1e6, "gpu.clock.type", "sm")
		put(rk, mClock, "Hz", float64(g.ClockMem)*1e6, "gpu.clock.type", "memory")
		put(rk, mClock, "Hz", float64(g.ClockGraphics)*1e6, "gpu.clock.type", "graphics")
		if !g.ECCUnsupported {
			put(rk, mECC, "{error}", float64(g.ECCCorrected), "error.type", "corrected")
			put(rk, mECC, "{error}", float64(g.ECCUncorrected), "error.type", "uncorrected")
		}
		for _, r := range throttleNames {
			if g.ThrottleSupported&r.bit != 0 {
				v := 0.0
				if g.ThrottleCurrent&r.bit != 0 {
					v = 1
				}
				put(rk, mThrottled, "1", v, "gpu.clock.throttle_reason", r.name)
			}
		}
		put(rk, mPCIe, "By/s", float64(g.PCIeTXKiB)*1024, "network.io.direction", "transmit")
		put(rk, mPCIe, "By/s", float64(g.PCIeRXKiB)*1024, "network.io.direction", "receive")
		for code, n := range tr.xids[i] {
			put(rk, mXID, "{error}", float64(n), "gpu.xid", strconv.FormatUint(code, 10))
		}
		procAttrs := func(pid uint32) []string {
			comm, _, cid := procEntry(pid)
			return []string{"process.pid", strconv.Itoa(int(pid)), "process.executable.name", comm, "container.id", cid}
		}
		if !g.MIGMode {
			for _, p := range g.Processes {
				put(rk, mProcMemory, "By", float64(p.UsedBytes), procAttrs(p.PID)...)
				var sum, n float64
				for _, s := range g.ProcessSamples {
					if s.PID == p.PID && s.TimestampUs > prev && s.TimestampUs <= clock {
						sum += float64(s.SMPercent)
						n++
					}
				}
				util := 0.0
				if n > 0 {
					util = sum / n / 100
				}
				put(rk, mProcUtil, "1", util, procAttrs(p.PID)...)
			}
			continue
		}
		for _, m := range g.MIG {
			mres := map[string]string{"gpu.mig.uuid": m.UUID, "gpu.mig.gpu_instance_id": strconv.Itoa(int(m.GPUInstanceID)),
				"gpu.mig.compute_instance_id": strconv.Itoa(int(m.ComputeID))}
			for k, v := range res {
				mres[k] = v
			}
			mk := resourceKey(mres)
			put(mk, mMemUsage, "By", float64(m.MemUsed))
			put(mk, mMemReserved, "By", float64(m.MemReserv))
			put(mk, mMemLimit, "By", float64(m.MemTotal))
			put(mk, mMemUtilization, "1", float64(m.MemUsed)/float64(m.MemTotal))
			for _, p := range m.Processes {
				put(mk, mProcMemory, "By", float64(p.UsedBytes), procAttrs(p.PID)...)
			}
		}
	}
	return out
}

// flatten turns the receiver's output into the same keys.
func flatten(t *testing.T, md pmetric.Metrics) map[string]float64 {
	t.Helper()
	str := func(m pcommon.Map) map[string]string {
		kv := map[string]string{}
		for k, v := range m.All() {
			kv[k] = v.AsString()
		}
		return kv
	}
	out := map[string]float64{}
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		rk := resourceKey(str(rm.Resource().Attributes()))
		for j := 0; j < rm.ScopeMetrics().Len(); j++ {
			ms := rm.ScopeMetrics().At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				dps := dataPoints(m)
				for p := 0; p < dps.Len(); p++ {
					dp := dps.At(p)
					v := dp.DoubleValue()
					if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
						v = float64(dp.IntValue())
					}
					key := pointKey(rk, m.Name(), m.Unit(), str(dp.Attributes()))
					if _, dup := out[key]; dup {
						t.Errorf("point reported twice: %s", key)
					}
					out[key] = v
				}
			}
		}
	}
	return out
}

// diffPoints lists every difference between the truth and what came out.
func diffPoints(want, got map[string]float64) []string {
	var diffs []string
	for k, w := range want {
		g, ok := got[k]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("missing %s (want %v)", k, w))
		case math.Abs(g-w) > 1e-9*math.Max(1, math.Abs(w)):
			diffs = append(diffs, fmt.Sprintf("wrong %s: got %v, want %v", k, g, w))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("unexpected %s = %v", k, g))
		}
	}
	sort.Strings(diffs)
	return diffs
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
		want := tr.scrape(step, defaultInitRetryInterval)
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
		requireExact(t, fmt.Sprintf("scrape %d", i), tr.scrape(step, defaultInitRetryInterval), flatten(t, res.metrics(t, i)))
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
		diffs := diffPoints(newTruth(t, sc).scrape(steps[0], defaultInitRetryInterval), flatten(t, res.metrics(t, 0)))
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
		diffs := diffPoints(newTruth(t, sc).scrape(steps[0], defaultInitRetryInterval), flatten(t, res.metrics(t, 0)))
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
