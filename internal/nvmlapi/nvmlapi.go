// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlapi // import "github.com/gpubuild/otelcol-gpubuild/internal/nvmlapi"

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Library is the part of nvml.Interface the components use. The real library
// (nvml.New) and go-nvml's mocks (pkg/nvml/mock, mock/dgxa100) satisfy it.
type Library interface {
	DeviceGetCount() (int, nvml.Return)
	DeviceGetHandleByIndex(int) (nvml.Device, nvml.Return)
	SystemGetDriverVersion() (string, nvml.Return)
	EventSetCreate() (nvml.EventSet, nvml.Return)
	Extensions() nvml.ExtendedInterface
	Shutdown() nvml.Return
	// GPU Performance Monitoring (Hopper and later): sample buffers and
	// the metrics of two samples.
	GpmSampleAlloc() (nvml.GpmSample, nvml.Return)
	GpmSampleFree(nvml.GpmSample) nvml.Return
	GpmMetricsGet(*nvml.GpmMetricsGetType) nvml.Return
}

// Device is the part of nvml.Device the components use, for a physical GPU or
// a MIG device handle.
type Device interface {
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
	GpmQueryDeviceSupport() (nvml.GpmSupport, nvml.Return)
	GpmSampleGet(nvml.GpmSample) nvml.Return
	// GpmMigSampleGet samples one GPU instance of a GPU in MIG mode: called
	// on the parent GPU's handle with the MIG GPU instance id.
	GpmMigSampleGet(int, nvml.GpmSample) nvml.Return
}

// LoadFunc initializes NVML. It returns a library only when nvmlInit
// returned SUCCESS.
type LoadFunc func() (Library, error)

// NewSystemLoader loads libnvidia-ml.so.1. One nvml.Interface serves every
// attempt: while the library is missing each Init tries dlopen again.
func NewSystemLoader(opts ...nvml.LibraryOption) LoadFunc {
	lib := nvml.New(opts...)
	return func() (Library, error) {
		if ret := lib.Init(); ret != nvml.SUCCESS {
			// Do not touch lib again (not even Shutdown): with the library
			// missing, every other symbol is unresolved and calling one
			// kills the process in the dynamic linker.
			return nil, fmt.Errorf("nvml init: %w", ret)
		}
		return lib, nil
	}
}

// Symbols records which NVML entry points the loaded library exports.
// go-nvml links every NVML function unresolved: calling one the library
// lacks kills the process in the dynamic linker ("symbol lookup error"),
// beyond recover(). So each entry point the receiver calls is looked up
// once after Init; a missing one turns off only the metrics that need it.
type Symbols struct {
	Core               bool // count, handles, UUIDs, error strings, shutdown: nothing works without them
	DriverVersion      bool
	Name               bool
	PciInfo            bool
	Samples            bool // nvmlDeviceGetSamples
	UtilRates          bool // nvmlDeviceGetUtilizationRates
	MemoryInfo         bool // nvmlDeviceGetMemoryInfo
	MemoryInfoV2       bool // nvmlDeviceGetMemoryInfo_v2 (R510+): adds reserved memory
	Temperature        bool
	Power              bool
	PowerLimit         bool
	Energy             bool // nvmlDeviceGetTotalEnergyConsumption
	ClockInfo          bool
	Ecc                bool
	ClocksEventReasons bool // nvmlDeviceGetCurrentClocksEventReasons (R535+)
	ClocksThrottle     bool // nvmlDeviceGetCurrentClocksThrottleReasons (deprecated name)
	Pcie               bool
	Processes          bool // nvmlDeviceGetComputeRunningProcesses, any version
	ProcessUtil        bool // nvmlDeviceGetProcessUtilization
	Mig                bool // nvmlDeviceGetMigMode and the MIG handle calls (R450+)
	Events             bool // event set calls behind the XID errors
	// GPM: nvmlGpmQueryDeviceSupport, nvmlGpmSampleAlloc/Free/Get and
	// nvmlGpmMetricsGet (R520+); GPMMig: nvmlGpmMigSampleGet besides.
	GPM    bool
	GPMMig bool

	// Missing lists the entry points not found, for one log line.
	Missing []string
}

// LookupSymbols looks up every entry point the components may call.
func LookupSymbols(lib Library) Symbols {
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
	sym := Symbols{
		Core: all(has("nvmlShutdown"), has("nvmlErrorString"),
			has("nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"),
			has("nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"),
			has("nvmlDeviceGetUUID")),
		DriverVersion: has("nvmlSystemGetDriverVersion"),
		Name:          has("nvmlDeviceGetName"),
		PciInfo:       has("nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2", "nvmlDeviceGetPciInfo"),
		Samples:       has("nvmlDeviceGetSamples"),
		UtilRates:     has("nvmlDeviceGetUtilizationRates"),
		MemoryInfo:    has("nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetMemoryInfo"),
		Temperature:   has("nvmlDeviceGetTemperature"),
		Power:         has("nvmlDeviceGetPowerUsage"),
		PowerLimit:    has("nvmlDeviceGetEnforcedPowerLimit"),
		Energy:        has("nvmlDeviceGetTotalEnergyConsumption"),
		ClockInfo:     has("nvmlDeviceGetClockInfo"),
		Ecc:           has("nvmlDeviceGetTotalEccErrors"),
		Pcie:          has("nvmlDeviceGetPcieThroughput"),
		Processes: has("nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2",
			"nvmlDeviceGetComputeRunningProcesses"),
		ProcessUtil: has("nvmlDeviceGetProcessUtilization"),
		Mig: all(has("nvmlDeviceGetMigMode"), has("nvmlDeviceGetMaxMigDeviceCount"), has("nvmlDeviceGetMigDeviceHandleByIndex"),
			has("nvmlDeviceGetGpuInstanceId"), has("nvmlDeviceGetComputeInstanceId")),
		Events: all(has("nvmlEventSetCreate"), has("nvmlDeviceRegisterEvents"),
			has("nvmlEventSetWait_v2", "nvmlEventSetWait"), has("nvmlEventSetFree")),
	}
	// Newer names whose absence is normal on older drivers, with a fallback:
	// looked up without counting as missing.
	sym.MemoryInfoV2 = ext.LookupSymbol("nvmlDeviceGetMemoryInfo_v2") == nil
	sym.ClocksEventReasons = ext.LookupSymbol("nvmlDeviceGetCurrentClocksEventReasons") == nil &&
		ext.LookupSymbol("nvmlDeviceGetSupportedClocksEventReasons") == nil
	sym.ClocksThrottle = ext.LookupSymbol("nvmlDeviceGetCurrentClocksThrottleReasons") == nil &&
		ext.LookupSymbol("nvmlDeviceGetSupportedClocksThrottleReasons") == nil
	if !sym.ClocksEventReasons && !sym.ClocksThrottle {
		missing = append(missing, "nvmlDeviceGetCurrentClocksEventReasons|nvmlDeviceGetCurrentClocksThrottleReasons")
	}
	// GPM exists from R520 on and only Hopper and later GPUs answer it:
	// its absence is normal, not worth the missing list.
	sym.GPM = ext.LookupSymbol("nvmlGpmQueryDeviceSupport") == nil && ext.LookupSymbol("nvmlGpmSampleAlloc") == nil &&
		ext.LookupSymbol("nvmlGpmSampleFree") == nil && ext.LookupSymbol("nvmlGpmSampleGet") == nil &&
		ext.LookupSymbol("nvmlGpmMetricsGet") == nil
	sym.GPMMig = sym.GPM && sym.Mig && ext.LookupSymbol("nvmlGpmMigSampleGet") == nil
	sym.Missing = missing
	return sym
}

// IsUnsupported reports NVML answers meaning "this GPU (or driver) cannot
// give this value": skip the metric for the GPU instead of failing.
func IsUnsupported(ret nvml.Return) bool {
	return ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_FUNCTION_NOT_FOUND
}

// ErrGPULost is the error of a GPU that answered ERROR_GPU_IS_LOST.
var ErrGPULost = errors.New("GPU is lost (ERROR_GPU_IS_LOST)")

// SampleValue decodes one nvmlValue_t union according to its type. NVML
// writes it in host byte order.
func SampleValue(t nvml.ValueType, v [8]byte) (float64, bool) {
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
