// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlreceiver // import "github.com/gpubuild/otelcol-gpubuild/receiver/nvmlreceiver"

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

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

// symbols records which newer NVML entry points the loaded driver exports.
// go-nvml links them unresolved: calling one that an older driver lacks
// aborts the process, so each is looked up once before first use.
type symbols struct {
	memoryInfoV2       bool // nvmlDeviceGetMemoryInfo_v2 (R510+): adds reserved memory
	clocksEventReasons bool // nvmlDeviceGetCurrentClocksEventReasons (R535+)
	clocksThrottle     bool // nvmlDeviceGetCurrentClocksThrottleReasons (deprecated name)
	energy             bool // nvmlDeviceGetTotalEnergyConsumption
	processUtil        bool // nvmlDeviceGetProcessUtilization
	mig                bool // nvmlDeviceGetMigMode and the MIG handle calls (R450+)
}

func lookupSymbols(lib library) symbols {
	ext := lib.Extensions()
	has := func(name string) bool { return ext.LookupSymbol(name) == nil }
	return symbols{
		memoryInfoV2:       has("nvmlDeviceGetMemoryInfo_v2"),
		clocksEventReasons: has("nvmlDeviceGetCurrentClocksEventReasons") && has("nvmlDeviceGetSupportedClocksEventReasons"),
		clocksThrottle:     has("nvmlDeviceGetCurrentClocksThrottleReasons") && has("nvmlDeviceGetSupportedClocksThrottleReasons"),
		energy:             has("nvmlDeviceGetTotalEnergyConsumption"),
		processUtil:        has("nvmlDeviceGetProcessUtilization"),
		mig:                has("nvmlDeviceGetMigMode") && has("nvmlDeviceGetMigDeviceHandleByIndex"),
	}
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
