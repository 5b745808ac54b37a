// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package fakenvml builds a fake libnvidia-ml.so.1 from C with the machine's
// C compiler and writes the files that drive it, for tests that exercise the
// real dlopen/cgo boundary of the nvml receiver without a GPU. The C source
// includes the nvml.h that go-nvml ships, so signatures and struct layouts
// are the real ones.
package fakenvml // import "github.com/gpubuild/otelcol-gpubuild/receiver/nvmlreceiver/fakenvml"

import (
	_ "embed"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

//go:embed c/fakenvml.c
var source []byte

// LibraryName is the file name NVML is loaded by.
const LibraryName = "libnvidia-ml.so.1"

// Environment variables the fake library reads.
const (
	EnvScenario = "FAKE_NVML_SCENARIO"
	EnvState    = "FAKE_NVML_STATE"
	// EnvReport names a file every nvmlShutdown writes
	// "gpm_samples_live <n>" to: GPM samples allocated and not freed.
	EnvReport = "FAKE_NVML_REPORT"
)

// Compile-time variants.
const (
	// NoV3 models a driver before R470: no nvmlDeviceGetComputeRunningProcesses_v3.
	NoV3 = "-DFAKE_NO_V3"
	// NoTemperature drops nvmlDeviceGetTemperature, a symbol the receiver needs.
	NoTemperature = "-DFAKE_NO_TEMPERATURE"
	// WrongProcessLayout writes v1 process records into the v3 buffer.
	WrongProcessLayout = "-DFAKE_WRONG_PROCESS_LAYOUT"
)

// Build compiles the fake library into dir/libnvidia-ml.so.1 with the C
// compiler cgo uses (go env CC) and go-nvml's nvml.h from the module cache.
// moduleDir is a directory inside the module that requires go-nvml.
func Build(dir, moduleDir string, defines ...string) (string, error) {
	header, err := goOutput(moduleDir, "list", "-m", "-f", "{{.Dir}}", "github.com/NVIDIA/go-nvml")
	if err != nil {
		return "", fmt.Errorf("locating go-nvml's nvml.h: %w", err)
	}
	cc, err := goOutput(moduleDir, "env", "CC")
	if err != nil || cc == "" {
		cc = "gcc"
	}
	src := filepath.Join(dir, "fakenvml.c")
	if err := os.WriteFile(src, source, 0o600); err != nil {
		return "", err
	}
	lib := filepath.Join(dir, LibraryName)
	args := append([]string{"-shared", "-fPIC", "-O1", "-Wall", "-Wextra", "-Werror",
		"-I", filepath.Join(header, "pkg", "nvml"), "-o", lib, src, "-lpthread"}, defines...)
	out, err := exec.Command(strings.Fields(cc)[0], append(strings.Fields(cc)[1:], args...)...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w\n%s", cc, strings.Join(args, " "), err, out)
	}
	return lib, nil
}

func goOutput(dir string, args ...string) (string, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return "", fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, ee.Stderr)
	}
	return strings.TrimSpace(string(out)), err
}

// Scenario is what the fake driver reports.
type Scenario struct {
	Driver string
	GPUs   []GPU
	// Realtime makes the fake's clock the wall clock while the state file
	// sets none: samples, power steps and process memory steps then take
	// effect at their wall-clock time (microseconds since the Unix epoch).
	Realtime bool
}

// GPU is one physical GPU; NVML units (mW, mJ, MHz, KiB/s, percent).
type GPU struct {
	UUID, Name, BusID                  string
	MemTotal, MemUsed, MemReserved     uint64
	Temperature                        uint32
	PowerMW, PowerLimitMW              uint32
	EnergyMJ                           uint64
	ClockSM, ClockMem, ClockGraphics   uint32
	ECCCorrected, ECCUncorrected       uint64
	ThrottleSupported, ThrottleCurrent uint64
	PCIeTXKiB, PCIeRXKiB               uint32
	// UtilGPU and UtilMem are the instantaneous utilization rates, the
	// receiver's fallback when no sample is new.
	UtilGPU, UtilMem uint32
	// PowerUnsupported and ECCUnsupported make power/energy and ECC answer
	// NVML_ERROR_NOT_SUPPORTED, as consumer boards do.
	PowerUnsupported, ECCUnsupported bool
	// SamplesUnsupported makes nvmlDeviceGetSamples answer
	// NVML_ERROR_NOT_SUPPORTED, as vGPU guests and some boards do.
	SamplesUnsupported     bool
	GPUSamples, MemSamples []Sample
	Processes              []Process
	ProcessSamples         []ProcessSample
	// MIGMode turns MIG on; MIG lists the instances.
	MIGMode bool
	MIG     []MIGDevice
	// Power scripts the draw: from each step's time on, the energy counter
	// grows by its power (on top of EnergyMJ) and the power reading is it.
	// Steps in time order.
	Power []PowerStep
	// ProcessMemory scripts processes' memory over time (physical GPU),
	// besides the static Processes. Steps in time order.
	ProcessMemory []ProcessMemoryStep
	// GPM is the answer to nvmlGpmQueryDeviceSupport: GPMNone (the
	// default, a GPU before Hopper: not supported), GPMOn, or
	// GPMUnsupported (NVML_ERROR_NOT_SUPPORTED).
	GPM GPMSupport
	// GPMSteps script the GPM metrics of the GPU and of its MIG GPU
	// instances; each (GPU instance)'s steps in time order.
	GPMSteps []GPMStep
}

// GPMSupport is how a GPU answers nvmlGpmQueryDeviceSupport.
type GPMSupport int

// How a GPU answers nvmlGpmQueryDeviceSupport; GPM samples succeed only
// with GPMOn.
const (
	GPMNone        GPMSupport = iota // not supported (isSupportedDevice 0)
	GPMOn                            // supported
	GPMUnsupported                   // NVML_ERROR_NOT_SUPPORTED
)

// GPMStep is the GPM metrics (percent) of the GPU (GPUInstance -1) or of
// one of its MIG GPU instances from a time (µs on the fake's clock) on.
type GPMStep struct {
	GPUInstance int
	FromUs      uint64
	// SM activity, SM occupancy, any tensor activity, DRAM bandwidth.
	Values [4]float64
}

// GPMMean is what nvmlGpmMetricsGet reports for two samples taken at t1
// and t2 (µs on the fake's clock) of the GPU (gi -1) or its GPU instance
// gi: each metric's time-weighted mean of the steps over [t1, t2] (a step
// holds until the next of the same instance; 0 before the first); the
// value at t1 when t1 == t2.
func (g GPU) GPMMean(gi int, t1, t2 uint64) [4]float64 {
	var out [4]float64
	for k := range out {
		var sum, at float64
		for i, st := range g.GPMSteps {
			if st.GPUInstance != gi {
				continue
			}
			to := uint64(math.MaxUint64)
			for _, nx := range g.GPMSteps[i+1:] {
				if nx.GPUInstance == gi {
					to = nx.FromUs
					break
				}
			}
			if st.FromUs <= t1 && (t1 < to || to == math.MaxUint64) {
				at = st.Values[k]
			}
			lo, hi := max(st.FromUs, t1), min(to, t2)
			if hi > lo {
				sum += st.Values[k] * float64(hi-lo)
			}
		}
		if t2 > t1 {
			out[k] = sum / float64(t2-t1)
		} else {
			out[k] = at
		}
	}
	return out
}

// PowerStep is a power draw from a time (µs on the fake's clock) on.
type PowerStep struct {
	FromUs, MW uint64
}

// ProcessMemoryStep is a process's memory from a time on; 0 bytes means
// the process holds none (it is not listed).
type ProcessMemoryStep struct {
	PID           uint32
	FromUs, Bytes uint64
}

// EnergyMJAt is what the fake's energy counter reads at t (µs on its
// clock): the scenario's arithmetic, truncated to whole millijoules as
// NVML's counter is.
func (g GPU) EnergyMJAt(t uint64) uint64 {
	var mj float64
	for i, p := range g.Power {
		to := t
		if i+1 < len(g.Power) && g.Power[i+1].FromUs < to {
			to = g.Power[i+1].FromUs
		}
		if to > p.FromUs {
			mj += float64(p.MW) * float64(to-p.FromUs) / 1e6
		}
	}
	return g.EnergyMJ + uint64(mj)
}

// Sample is one utilization sample: timestamp (µs) and percent.
type Sample struct {
	TimestampUs uint64
	Percent     uint32
}

// Process is one compute process on a GPU or MIG device.
type Process struct {
	PID       uint32
	UsedBytes uint64
}

// ProcessSample is one per-process SM utilization sample.
type ProcessSample struct {
	PID         uint32
	TimestampUs uint64
	SMPercent   uint32
}

// MIGDevice is one MIG instance in a slot of its parent.
type MIGDevice struct {
	Slot                         int
	UUID                         string
	GPUInstanceID, ComputeID     uint32
	MemTotal, MemUsed, MemReserv uint64
	Processes                    []Process
}

// WriteFile writes the scenario in the fake's text format.
func (s Scenario) WriteFile(path string) error {
	var b strings.Builder
	if s.Driver != "" {
		fmt.Fprintf(&b, "driver %s\n", s.Driver)
	}
	if s.Realtime {
		b.WriteString("realtime\n")
	}
	for i, g := range s.GPUs {
		fmt.Fprintf(&b, "gpu %d uuid=%s name=%s bus=%s mem_total=%d mem_used=%d mem_reserved=%d temp=%d power_mw=%d power_limit_mw=%d energy_mj=%d clock_sm=%d clock_mem=%d clock_gfx=%d ecc_corr=%d ecc_uncorr=%d throttle_supported=%d throttle_current=%d pcie_tx_kib=%d pcie_rx_kib=%d util_gpu=%d util_mem=%d",
			i, g.UUID, strings.ReplaceAll(g.Name, " ", "_"), g.BusID, g.MemTotal, g.MemUsed, g.MemReserved, g.Temperature,
			g.PowerMW, g.PowerLimitMW, g.EnergyMJ, g.ClockSM, g.ClockMem, g.ClockGraphics, g.ECCCorrected, g.ECCUncorrected,
			g.ThrottleSupported, g.ThrottleCurrent, g.PCIeTXKiB, g.PCIeRXKiB, g.UtilGPU, g.UtilMem)
		if g.PowerUnsupported {
			b.WriteString(" power=unsupported")
		}
		if g.ECCUnsupported {
			b.WriteString(" ecc=unsupported")
		}
		if g.MIGMode {
			b.WriteString(" mig=on")
		}
		if g.SamplesUnsupported {
			b.WriteString(" samples=unsupported")
		}
		switch g.GPM {
		case GPMOn:
			b.WriteString(" gpm=on")
		case GPMUnsupported:
			b.WriteString(" gpm=unsupported")
		}
		b.WriteString("\n")
		for _, smp := range g.GPUSamples {
			fmt.Fprintf(&b, "sample %d gpu %d %d\n", i, smp.TimestampUs, smp.Percent)
		}
		for _, smp := range g.MemSamples {
			fmt.Fprintf(&b, "sample %d mem %d %d\n", i, smp.TimestampUs, smp.Percent)
		}
		for _, p := range g.Processes {
			fmt.Fprintf(&b, "proc %d %d %d\n", i, p.PID, p.UsedBytes)
		}
		for _, p := range g.ProcessSamples {
			fmt.Fprintf(&b, "putil %d %d %d %d\n", i, p.PID, p.TimestampUs, p.SMPercent)
		}
		for _, p := range g.Power {
			fmt.Fprintf(&b, "power %d %d %d\n", i, p.FromUs, p.MW)
		}
		for _, p := range g.ProcessMemory {
			fmt.Fprintf(&b, "procmem %d %d %d %d\n", i, p.PID, p.FromUs, p.Bytes)
		}
		for _, st := range g.GPMSteps {
			fmt.Fprintf(&b, "gpm %d %d %d %.17g %.17g %.17g %.17g\n", i, st.GPUInstance, st.FromUs, st.Values[0], st.Values[1], st.Values[2], st.Values[3])
		}
		for _, m := range g.MIG {
			fmt.Fprintf(&b, "mig %d %d %s %d %d %d %d %d\n", i, m.Slot, m.UUID, m.GPUInstanceID, m.ComputeID, m.MemTotal, m.MemUsed, m.MemReserv)
			for _, p := range m.Processes {
				fmt.Fprintf(&b, "migproc %d %d %d %d\n", i, m.Slot, p.PID, p.UsedBytes)
			}
		}
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}

// State is what changes during a run.
type State struct {
	// ClockUs hides samples taken after it; 0 shows every sample.
	ClockUs uint64
	// Lost GPUs answer NVML_ERROR_GPU_IS_LOST; a GPU removed from the list
	// is back with a new handle.
	Lost []int
	// XIDs are delivered once each, in order, to event sets the GPU is
	// registered with. Keep earlier ones listed: the list is replayed from
	// its start only in the sense that delivered entries are skipped.
	XIDs []XID
}

// XID is one XID critical error event.
type XID struct {
	GPU  int
	Code uint64
}

// WriteFile replaces the state file atomically (write and rename), so the
// fake never reads half of it.
func (s State) WriteFile(path string) error {
	var b strings.Builder
	if s.ClockUs > 0 {
		fmt.Fprintf(&b, "clock %d\n", s.ClockUs)
	}
	for _, g := range s.Lost {
		fmt.Fprintf(&b, "lost %d\n", g)
	}
	for _, x := range s.XIDs {
		fmt.Fprintf(&b, "xid %d %d\n", x.GPU, x.Code)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
