// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlreceiver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/gpubuild/otelcol-gpubuild/receiver/nvmlreceiver/internal/metadata"
)

const benchProcsPerGPU = 4

// writeBenchProcs creates /proc entries for the benchmark's processes.
func writeBenchProcs(b *testing.B, dir string, pids []uint32) {
	b.Helper()
	for _, pid := range pids {
		p := filepath.Join(dir, fmt.Sprint(pid))
		if err := os.MkdirAll(p, 0o755); err != nil {
			b.Fatal(err)
		}
		cg := fmt.Sprintf("0::/kubepods.slice/kubepods-pod1.slice/cri-containerd-%064x.scope\n", pid)
		if err := os.WriteFile(filepath.Join(p, "cgroup"), []byte(cg), 0o644); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "comm"), []byte("worker\n"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

func benchPIDs(gpuIndex int) []uint32 {
	pids := make([]uint32, benchProcsPerGPU)
	for k := range pids {
		pids[k] = uint32(10_000 + 100*gpuIndex + k)
	}
	return pids
}

func runScrapeBenchmark(b *testing.B, lib library, procDir string) {
	cfg := createDefaultConfig()
	cfg.Metrics.GpuXidErrors.Enabled = false
	s := newGPUScraperWith(cfg, receivertest.NewNopSettings(metadata.Type), loaderOf(lib), os.DirFS(procDir), time.Now)
	if err := s.start(context.Background(), componenttest.NewNopHost()); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = s.shutdown(context.Background()) }()
	md, err := s.scrape(context.Background()) // warm the /proc cache, as in steady state
	if err != nil {
		b.Fatal(err)
	}
	points := md.DataPointCount()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := s.scrape(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/8/1000, "µs/gpu")
	b.ReportMetric(float64(points), "points/op")
}

// BenchmarkScrape8GPUsDGXA100 scrapes go-nvml's dgxa100 mock (8 A100s),
// each with 4 processes. The moq mocks lock a mutex and record every call,
// so this includes their overhead.
func BenchmarkScrape8GPUsDGXA100(b *testing.B) {
	srv := newMockServer()
	dir := b.TempDir()
	for i := range 8 {
		pids := benchPIDs(i)
		writeBenchProcs(b, dir, pids)
		procs := make([]nvml.ProcessInfo, len(pids))
		utils := make([]nvml.ProcessUtilizationSample, len(pids))
		for k, pid := range pids {
			procs[k] = nvml.ProcessInfo{Pid: pid, UsedGpuMemory: uint64(k+1) << 28}
		}
		var now uint64
		d := gpu(srv, i)
		d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return procs, nvml.SUCCESS }
		d.GetProcessUtilizationFunc = func(uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
			now++
			for k, pid := range pids {
				utils[k] = nvml.ProcessUtilizationSample{Pid: pid, TimeStamp: now, SmUtil: uint32(10 * k)}
			}
			return utils, nvml.SUCCESS
		}
		samples := make([]nvml.Sample, 60)
		d.GetSamplesFunc = func(_ nvml.SamplingType, last uint64) (nvml.ValueType, []nvml.Sample, nvml.Return) {
			for k := range samples {
				samples[k] = uintSample(last+uint64(k)+1, uint32(k))
			}
			return nvml.VALUE_TYPE_UNSIGNED_INT, samples, nvml.SUCCESS
		}
	}
	runScrapeBenchmark(b, srv, dir)
}

// BenchmarkScrape8GPUsStub answers every NVML query from a plain struct, so
// the time is the receiver's own Go work per scrape (pdata, attributes,
// averaging, /proc cache) without any mock bookkeeping.
func BenchmarkScrape8GPUsStub(b *testing.B) {
	dir := b.TempDir()
	lib := &stubLibrary{}
	for i := range 8 {
		pids := benchPIDs(i)
		writeBenchProcs(b, dir, pids)
		lib.devices = append(lib.devices, newStubDevice(i, pids))
	}
	runScrapeBenchmark(b, lib, dir)
}

// BenchmarkProcessLookupCold is the /proc cost of a process seen for the
// first time (two small file reads and the cgroup parse).
func BenchmarkProcessLookupCold(b *testing.B) {
	dir := b.TempDir()
	writeBenchProcs(b, dir, []uint32{4242})
	r := newProcessResolver(os.DirFS(dir))
	b.ReportAllocs()
	for b.Loop() {
		clear(r.cache)
		if _, ok := r.lookup(4242); !ok {
			b.Fatal("not found")
		}
	}
}

type stubLibrary struct {
	devices []*stubDevice
}

func (l *stubLibrary) DeviceGetCount() (int, nvml.Return) { return len(l.devices), nvml.SUCCESS }
func (l *stubLibrary) DeviceGetHandleByIndex(i int) (nvml.Device, nvml.Return) {
	return l.devices[i], nvml.SUCCESS
}
func (*stubLibrary) SystemGetDriverVersion() (string, nvml.Return) { return "550.54.15", nvml.SUCCESS }
func (*stubLibrary) EventSetCreate() (nvml.EventSet, nvml.Return) {
	return nil, nvml.ERROR_NOT_SUPPORTED
}
func (*stubLibrary) Extensions() nvml.ExtendedInterface { return stubExtensions{} }
func (*stubLibrary) Shutdown() nvml.Return              { return nvml.SUCCESS }
func (*stubLibrary) GpmSampleAlloc() (nvml.GpmSample, nvml.Return) {
	return nil, nvml.ERROR_NOT_SUPPORTED
}
func (*stubLibrary) GpmSampleFree(nvml.GpmSample) nvml.Return { return nvml.SUCCESS }
func (*stubLibrary) GpmMetricsGet(*nvml.GpmMetricsGetType) nvml.Return {
	return nvml.ERROR_NOT_SUPPORTED
}

type stubExtensions struct{}

func (stubExtensions) LookupSymbol(string) error { return nil }

// stubDevice implements the queries the receiver makes; the embedded
// nil nvml.Device only completes the interface.
type stubDevice struct {
	nvml.Device
	index   int
	procs   []nvml.ProcessInfo
	utils   []nvml.ProcessUtilizationSample
	samples []nvml.Sample
	tick    uint64
}

func newStubDevice(i int, pids []uint32) *stubDevice {
	d := &stubDevice{index: i, samples: make([]nvml.Sample, 60)}
	for k, pid := range pids {
		d.procs = append(d.procs, nvml.ProcessInfo{Pid: pid, UsedGpuMemory: uint64(k+1) << 28})
		d.utils = append(d.utils, nvml.ProcessUtilizationSample{Pid: pid, SmUtil: uint32(10 * k)})
	}
	return d
}

func (d *stubDevice) GetUUID() (string, nvml.Return) {
	return fmt.Sprintf("GPU-00000000-0000-0000-0000-%012d", d.index), nvml.SUCCESS
}
func (*stubDevice) GetName() (string, nvml.Return) { return "NVIDIA A100-SXM4-40GB", nvml.SUCCESS }
func (*stubDevice) GpmQueryDeviceSupport() (nvml.GpmSupport, nvml.Return) {
	return nvml.GpmSupport{}, nvml.SUCCESS // an A100: no GPM
}
func (*stubDevice) GetPciInfo() (nvml.PciInfo, nvml.Return) {
	var p nvml.PciInfo
	copy(p.BusId[:], "00000000:10:00.0")
	return p, nvml.SUCCESS
}
func (d *stubDevice) GetSamples(_ nvml.SamplingType, last uint64) (nvml.ValueType, []nvml.Sample, nvml.Return) {
	for k := range d.samples {
		d.samples[k] = uintSample(last+uint64(k)+1, uint32(k))
	}
	return nvml.VALUE_TYPE_UNSIGNED_INT, d.samples, nvml.SUCCESS
}
func (*stubDevice) GetUtilizationRates() (nvml.Utilization, nvml.Return) {
	return nvml.Utilization{Gpu: 50, Memory: 20}, nvml.SUCCESS
}
func (*stubDevice) GetMemoryInfo_v2() (nvml.Memory_v2, nvml.Return) { //nolint:revive // go-nvml's name
	return nvml.Memory_v2{Total: 40 << 30, Reserved: 512 << 20, Used: 8 << 30, Free: 40<<30 - 512<<20 - 8<<30}, nvml.SUCCESS
}
func (*stubDevice) GetTemperature(nvml.TemperatureSensors) (uint32, nvml.Return) {
	return 55, nvml.SUCCESS
}
func (*stubDevice) GetPowerUsage() (uint32, nvml.Return)             { return 250_000, nvml.SUCCESS }
func (*stubDevice) GetEnforcedPowerLimit() (uint32, nvml.Return)     { return 400_000, nvml.SUCCESS }
func (*stubDevice) GetTotalEnergyConsumption() (uint64, nvml.Return) { return 1 << 30, nvml.SUCCESS }
func (*stubDevice) GetClockInfo(nvml.ClockType) (uint32, nvml.Return) {
	return 1410, nvml.SUCCESS
}
func (*stubDevice) GetTotalEccErrors(nvml.MemoryErrorType, nvml.EccCounterType) (uint64, nvml.Return) {
	return 0, nvml.SUCCESS
}
func (*stubDevice) GetSupportedClocksEventReasons() (uint64, nvml.Return) {
	return nvml.ClocksEventReasonAll, nvml.SUCCESS
}
func (*stubDevice) GetCurrentClocksEventReasons() (uint64, nvml.Return) {
	return nvml.ClocksEventReasonSwPowerCap, nvml.SUCCESS
}
func (*stubDevice) GetPcieThroughput(nvml.PcieUtilCounter) (uint32, nvml.Return) {
	return 1000, nvml.SUCCESS
}
func (d *stubDevice) GetComputeRunningProcesses() ([]nvml.ProcessInfo, nvml.Return) {
	return d.procs, nvml.SUCCESS
}
func (d *stubDevice) GetProcessUtilization(uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
	d.tick++
	for k := range d.utils {
		d.utils[k].TimeStamp = d.tick
	}
	return d.utils, nvml.SUCCESS
}
func (*stubDevice) GetMigMode() (int, int, nvml.Return) { return 0, 0, nvml.SUCCESS }
