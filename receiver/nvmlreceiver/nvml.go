// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlreceiver // import "github.com/gpubuild/otelcol-gpubuild/receiver/nvmlreceiver"

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// library is the part of nvml.Interface the receiver uses. The real library
// (nvml.New) and go-nvml's mocks (pkg/nvml/mock, mock/dgxa100) satisfy it.
type library interface {
	DeviceGetCount() (int, nvml.Return)
	DeviceGetHandleByIndex(int) (nvml.Device, nvml.Return)
	SystemGetDriverVersion() (string, nvml.Return)
	EventSetCreate() (nvml.EventSet, nvml.Return)
	Extensions() nvml.ExtendedInterface
	Shutdown() nvml.Return
}

// device is the part of nvml.Device the receiver uses, for a physical GPU or
// a MIG device handle.
type device interface {
	GetUUID() (string, nvml.Return)
	GetName() (string, nvml.Return)
	GetPciInfo() (nvml.PciInfo, nvml.Return)
	GetSamples(nvml.SamplingType, uint64) (nvml.ValueType, []nvml.Sample, nvml.Return)
	GetUtilizationRates() (nvml.Utilization, nvml.Return)
	GetMemoryInfo() (nvml.Memory, nvml.Return)
	GetMemoryInfo_v2() (nvml.Memory_v2, nvml.Return)
	GetTemperature(nvml.TemperatureSensors) (uint32, nvml.Return)
	GetPowerUsage() (uint32, nvml.Return)
	GetEnforcedPowerLimit() (uint32, nvml.Return)
	GetTotalEnergyConsumption() (uint64, nvml.Return)
	GetClockInfo(nvml.ClockType) (uint32, nvml.Return)
	GetTotalEccErrors(nvml.MemoryErrorType, nvml.EccCounterType) (uint64, nvml.Return)
	GetCurrentClocksEventReasons() (uint64, nvml.Return)
	GetSupportedClocksEventReasons() (uint64, nvml.Return)
	GetCurrentClocksThrottleReasons() (uint64, nvml.Return)
	GetSupportedClocksThrottleReasons() (uint64, nvml.Return)
	GetPcieThroughput(nvml.PcieUtilCounter) (uint32, nvml.Return)
	GetComputeRunningProcesses() ([]nvml.ProcessInfo, nvml.Return)
	GetProcessUtilization(uint64) ([]nvml.ProcessUtilizationSample, nvml.Return)
	GetMigMode() (int, int, nvml.Return)
	GetMaxMigDeviceCount() (int, nvml.Return)
	GetMigDeviceHandleByIndex(int) (nvml.Device, nvml.Return)
	GetGpuInstanceId() (int, nvml.Return)
	GetComputeInstanceId() (int, nvml.Return)
	RegisterEvents(uint64, nvml.EventSet) nvml.Return
}

// loadFunc initializes NVML. It returns a library only when nvmlInit
// returned SUCCESS.
type loadFunc func() (library, error)

// newSystemLoader loads libnvidia-ml.so.1. One nvml.Interface serves every
// attempt: while the library is missing each Init tries dlopen again.
func newSystemLoader(opts ...nvml.LibraryOption) loadFunc {
	lib := nvml.New(opts...)
	return func() (library, error) {
		if ret := lib.Init(); ret != nvml.SUCCESS {
			// Do not touch lib again (not even Shutdown): with the library
			// missing, every other symbol is unresolved and calling one
			// kills the process in the dynamic linker.
			return nil, fmt.Errorf("nvml init: %w", ret)
		}
		return lib, nil
	}
}

// symbols records which NVML entry points the loaded library exports.
// go-nvml links every NVML function unresolved: calling one the library
// lacks kills the process in the dynamic linker ("symbol lookup error"),
// beyond recover(). So each entry point the receiver calls is looked up
// once after Init; a missing one turns off only the metrics that need it.
type symbols struct {
	core               bool // count, handles, UUIDs, error strings, shutdown: nothing works without them
	driverVersion      bool
	name               bool
	pciInfo            bool
	samples            bool // nvmlDeviceGetSamples
	utilRates          bool // nvmlDeviceGetUtilizationRates
	memoryInfo         bool // nvmlDeviceGetMemoryInfo
	memoryInfoV2       bool // nvmlDeviceGetMemoryInfo_v2 (R510+): adds reserved memory
	temperature        bool
	power              bool
	powerLimit         bool
	energy             bool // nvmlDeviceGetTotalEnergyConsumption
	clockInfo          bool
	ecc                bool
	clocksEventReasons bool // nvmlDeviceGetCurrentClocksEventReasons (R535+)
	clocksThrottle     bool // nvmlDeviceGetCurrentClocksThrottleReasons (deprecated name)
	pcie               bool
	processes          bool // nvmlDeviceGetComputeRunningProcesses, any version
	processUtil        bool // nvmlDeviceGetProcessUtilization
	mig                bool // nvmlDeviceGetMigMode and the MIG handle calls (R450+)
	events             bool // event set calls behind the XID errors

	// missing lists the entry points not found, for one log line.
	missing []string
}

func lookupSymbols(lib library) symbols {
	ext := lib.Extensions()
	var missing []string
	// has reports whether the library exports at least one of names.
	// go-nvml itself picks the newest version of a versioned entry point.
	has := func(names ...string) bool {
		for _, n := range names {
			if ext.LookupSymbol(n) == nil {
				return true
			}
		}
		missing = append(missing, strings.Join(names, "|"))
		return false
	}
	all := func(ok ...bool) bool { return !slices.Contains(ok, false) }
	sym := symbols{
		core: all(has("nvmlShutdown"), has("nvmlErrorString"),
			has("nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"),
			has("nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"),
			has("nvmlDeviceGetUUID")),
		driverVersion: has("nvmlSystemGetDriverVersion"),
		name:          has("nvmlDeviceGetName"),
		pciInfo:       has("nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2", "nvmlDeviceGetPciInfo"),
		samples:       has("nvmlDeviceGetSamples"),
		utilRates:     has("nvmlDeviceGetUtilizationRates"),
		memoryInfo:    has("nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetMemoryInfo"),
		temperature:   has("nvmlDeviceGetTemperature"),
		power:         has("nvmlDeviceGetPowerUsage"),
		powerLimit:    has("nvmlDeviceGetEnforcedPowerLimit"),
		energy:        has("nvmlDeviceGetTotalEnergyConsumption"),
		clockInfo:     has("nvmlDeviceGetClockInfo"),
		ecc:           has("nvmlDeviceGetTotalEccErrors"),
		pcie:          has("nvmlDeviceGetPcieThroughput"),
		processes: has("nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2",
			"nvmlDeviceGetComputeRunningProcesses"),
		processUtil: has("nvmlDeviceGetProcessUtilization"),
		mig: all(has("nvmlDeviceGetMigMode"), has("nvmlDeviceGetMaxMigDeviceCount"), has("nvmlDeviceGetMigDeviceHandleByIndex"),
			has("nvmlDeviceGetGpuInstanceId"), has("nvmlDeviceGetComputeInstanceId")),
		events: all(has("nvmlEventSetCreate"), has("nvmlDeviceRegisterEvents"),
			has("nvmlEventSetWait_v2", "nvmlEventSetWait"), has("nvmlEventSetFree")),
	}
	// Newer names whose absence is normal on older drivers, with a fallback:
	// looked up without counting as missing.
	sym.memoryInfoV2 = ext.LookupSymbol("nvmlDeviceGetMemoryInfo_v2") == nil
	sym.clocksEventReasons = ext.LookupSymbol("nvmlDeviceGetCurrentClocksEventReasons") == nil &&
		ext.LookupSymbol("nvmlDeviceGetSupportedClocksEventReasons") == nil
	sym.clocksThrottle = ext.LookupSymbol("nvmlDeviceGetCurrentClocksThrottleReasons") == nil &&
		ext.LookupSymbol("nvmlDeviceGetSupportedClocksThrottleReasons") == nil
	if !sym.clocksEventReasons && !sym.clocksThrottle {
		missing = append(missing, "nvmlDeviceGetCurrentClocksEventReasons|nvmlDeviceGetCurrentClocksThrottleReasons")
	}
	sym.missing = missing
	return sym
}

// isUnsupported reports NVML answers meaning "this GPU (or driver) cannot
// give this value": skip the metric for the GPU instead of failing.
func isUnsupported(ret nvml.Return) bool {
	return ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_FUNCTION_NOT_FOUND
}

var errGPULost = errors.New("GPU is lost (ERROR_GPU_IS_LOST)")

// sampleValue decodes one nvmlValue_t union according to its type. NVML
// writes it in host byte order.
func sampleValue(t nvml.ValueType, v [8]byte) (float64, bool) {
	switch t {
	case nvml.VALUE_TYPE_DOUBLE:
		return math.Float64frombits(binary.NativeEndian.Uint64(v[:])), true
	case nvml.VALUE_TYPE_UNSIGNED_INT:
		return float64(binary.NativeEndian.Uint32(v[:4])), true
	case nvml.VALUE_TYPE_UNSIGNED_LONG, nvml.VALUE_TYPE_UNSIGNED_LONG_LONG:
		return float64(binary.NativeEndian.Uint64(v[:])), true
	case nvml.VALUE_TYPE_SIGNED_LONG_LONG:
		return float64(int64(binary.NativeEndian.Uint64(v[:]))), true
	case nvml.VALUE_TYPE_SIGNED_INT:
		return float64(int32(binary.NativeEndian.Uint32(v[:4]))), true
	case nvml.VALUE_TYPE_UNSIGNED_SHORT:
		return float64(binary.NativeEndian.Uint16(v[:2])), true
	}
	return 0, false
}

// averageSamples averages the samples newer than lastTs and returns the
// newest timestamp seen, to pass as lastTs next time. ok is false when
// there is no such sample.
func averageSamples(t nvml.ValueType, samples []nvml.Sample, lastTs uint64) (avg float64, newest uint64, ok bool) {
	newest = lastTs
	var sum float64
	var n int
	for i := range samples {
		s := &samples[i]
		if s.TimeStamp <= lastTs {
			continue
		}
		v, valid := sampleValue(t, s.SampleValue)
		if !valid {
			continue
		}
		sum += v
		n++
		if s.TimeStamp > newest {
			newest = s.TimeStamp
		}
	}
	if n == 0 {
		return 0, lastTs, false
	}
	return sum / float64(n), newest, true
}

// cString converts a NUL-terminated byte array from an NVML struct.
func cString(b []uint8) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
