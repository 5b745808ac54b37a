// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlreceiver

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gpubuild/otelcol-gpubuild/receiver/nvmlreceiver/internal/metadata"
)

// Values the mock GPUs report. Each GPU i adds i where noted so every GPU
// is distinguishable; the tests derive expectations from these inputs.
const (
	mockMemTotal      = 40 << 30 // 40 GiB
	mockMemReserved   = 512 << 20
	mockPowerLimitMW  = 400_000
	mockEnergyMJ      = 123_456_789
	mockClockMemMHz   = 1215
	mockThrottleMask  = nvml.ClocksEventReasonGpuIdle | nvml.ClocksEventReasonSwPowerCap | nvml.ClocksThrottleReasonHwSlowdown | nvml.ClocksEventReasonSwThermalSlowdown
	mockSampleStartUs = 1_000_000
)

func uintSample(ts uint64, v uint32) nvml.Sample {
	s := nvml.Sample{TimeStamp: ts}
	binary.NativeEndian.PutUint32(s.SampleValue[:4], v)
	return s
}

// utilSamples is NVML's ring buffer for one GPU: three GPU samples
// (10+i, 20+i, 30+i percent) and two memory samples (5+i, 15+i).
func utilSamples(i int, kind nvml.SamplingType) []nvml.Sample {
	u := uint32(i)
	if kind == nvml.GPU_UTILIZATION_SAMPLES {
		return []nvml.Sample{uintSample(mockSampleStartUs+100, 10+u), uintSample(mockSampleStartUs+200, 20+u), uintSample(mockSampleStartUs+300, 30+u)}
	}
	return []nvml.Sample{uintSample(mockSampleStartUs+150, 5+u), uintSample(mockSampleStartUs+250, 15+u)}
}

// filterSamples does what NVML does with lastSeenTimeStamp.
func filterSamples(all []nvml.Sample, last uint64) ([]nvml.Sample, nvml.Return) {
	var out []nvml.Sample
	for _, s := range all {
		if s.TimeStamp > last {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, nvml.ERROR_NOT_FOUND
	}
	return out, nvml.SUCCESS
}

// fillDevice gives a dgxa100 GPU the functions the receiver calls.
func fillDevice(d *dgxa100.Device, i int) {
	d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
		var p nvml.PciInfo
		copy(p.BusId[:], fmt.Sprintf("00000000:%02X:00.0", 0x10+i))
		return p, nvml.SUCCESS
	}
	d.GetSamplesFunc = func(kind nvml.SamplingType, last uint64) (nvml.ValueType, []nvml.Sample, nvml.Return) {
		s, ret := filterSamples(utilSamples(i, kind), last)
		return nvml.VALUE_TYPE_UNSIGNED_INT, s, ret
	}
	d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		return nvml.Utilization{Gpu: 90, Memory: 80}, nvml.SUCCESS
	}
	used := uint64(i+1) << 30
	d.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
		return nvml.Memory_v2{Total: mockMemTotal, Reserved: mockMemReserved, Used: used, Free: mockMemTotal - mockMemReserved - used}, nvml.SUCCESS
	}
	d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		return nvml.Memory{Total: mockMemTotal, Used: used, Free: mockMemTotal - used}, nvml.SUCCESS
	}
	d.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return uint32(40 + i), nvml.SUCCESS }
	d.GetPowerUsageFunc = func() (uint32, nvml.Return) { return uint32(200_000 + 1_500*i), nvml.SUCCESS }
	d.GetEnforcedPowerLimitFunc = func() (uint32, nvml.Return) { return mockPowerLimitMW, nvml.SUCCESS }
	d.GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) { return mockEnergyMJ + uint64(i), nvml.SUCCESS }
	d.GetClockInfoFunc = func(c nvml.ClockType) (uint32, nvml.Return) {
		switch c {
		case nvml.CLOCK_SM:
			return uint32(1000 + i), nvml.SUCCESS
		case nvml.CLOCK_MEM:
			return mockClockMemMHz, nvml.SUCCESS
		case nvml.CLOCK_GRAPHICS:
			return uint32(1100 + i), nvml.SUCCESS
		}
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	d.GetTotalEccErrorsFunc = func(t nvml.MemoryErrorType, c nvml.EccCounterType) (uint64, nvml.Return) {
		if c != nvml.VOLATILE_ECC {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		if t == nvml.MEMORY_ERROR_TYPE_CORRECTED {
			return uint64(3 * i), nvml.SUCCESS
		}
		return uint64(i % 2), nvml.SUCCESS
	}
	d.GetSupportedClocksEventReasonsFunc = func() (uint64, nvml.Return) { return mockThrottleMask, nvml.SUCCESS }
	d.GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) {
		if i%2 == 0 {
			return nvml.ClocksEventReasonSwPowerCap, nvml.SUCCESS
		}
		return nvml.ClocksEventReasonNone, nvml.SUCCESS
	}
	d.GetPcieThroughputFunc = func(c nvml.PcieUtilCounter) (uint32, nvml.Return) {
		if c == nvml.PCIE_UTIL_TX_BYTES {
			return uint32(1000 + i), nvml.SUCCESS
		}
		return uint32(2000 + i), nvml.SUCCESS
	}
	d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.SUCCESS }
	d.GetProcessUtilizationFunc = func(uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
		return nil, nvml.ERROR_NOT_FOUND
	}
	d.RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.SUCCESS }
	d.GpmQueryDeviceSupportFunc = func() (nvml.GpmSupport, nvml.Return) {
		return nvml.GpmSupport{}, nvml.SUCCESS // an A100: no GPM
	}
}

// newMockServer returns 8 mocked A100s with every receiver query answered.
func newMockServer() *dgxa100.Server {
	srv := dgxa100.New()
	for i, d := range srv.Devices {
		fillDevice(d.(*dgxa100.Device), i)
	}
	srv.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) {
		return newMockEventSet(), nvml.SUCCESS
	}
	return srv
}

func gpu(srv *dgxa100.Server, i int) *dgxa100.Device { return srv.Devices[i].(*dgxa100.Device) }

// mockEventSet delivers events pushed into its channel.
type mockEventSet struct {
	mock.EventSet
	events chan nvml.EventData
}

func newMockEventSet() *mockEventSet {
	es := &mockEventSet{events: make(chan nvml.EventData, 16)}
	es.WaitFunc = func(timeoutMs uint32) (nvml.EventData, nvml.Return) {
		select {
		case e := <-es.events:
			return e, nvml.SUCCESS
		case <-time.After(time.Duration(timeoutMs) * time.Millisecond):
			return nvml.EventData{}, nvml.ERROR_TIMEOUT
		}
	}
	es.FreeFunc = func() nvml.Return { return nvml.SUCCESS }
	return es
}

// testClock is a settable clock for the retry schedule.
type testClock struct{ t time.Time }

func (c *testClock) now() time.Time          { return c.t }
func (c *testClock) advance(d time.Duration) { c.t = c.t.Add(d) }

type testEnv struct {
	scraper *gpuScraper
	clock   *testClock
	logs    *observer.ObservedLogs
	procDir string
}

func loaderOf(lib library) loadFunc {
	return func() (library, error) { return lib, nil }
}

func newTestEnv(t *testing.T, cfg *Config, load loadFunc) *testEnv {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	set := receivertest.NewNopSettings(metadata.Type)
	set.Logger = zap.New(core)
	env := &testEnv{clock: &testClock{t: time.Unix(1_700_000_000, 0)}, logs: logs, procDir: t.TempDir()}
	env.scraper = newGPUScraperWith(cfg, set, load, os.DirFS(env.procDir), env.clock.now)
	require.NoError(t, env.scraper.start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, env.scraper.shutdown(context.Background())) })
	return env
}

func defaultTestConfig() *Config {
	cfg := createDefaultConfig()
	cfg.Metrics.GpuXidErrors.Enabled = false // needs an event loop; tested separately
	return cfg
}

func (e *testEnv) scrape(t *testing.T) (pmetric.Metrics, error) {
	t.Helper()
	return e.scraper.scrape(context.Background())
}

// addProcess writes /proc/<pid>/comm and /proc/<pid>/cgroup.
func (e *testEnv) addProcess(t *testing.T, pid uint32, comm, cgroup string) {
	t.Helper()
	dir := filepath.Join(e.procDir, fmt.Sprint(pid))
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "comm"), []byte(comm+"\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cgroup"), []byte(cgroup), 0o644))
}

func (e *testEnv) removeProcess(t *testing.T, pid uint32) {
	t.Helper()
	require.NoError(t, os.RemoveAll(filepath.Join(e.procDir, fmt.Sprint(pid))))
}

// resourceFor finds the ResourceMetrics whose resource has every given
// attribute value.
func resourceFor(t *testing.T, md pmetric.Metrics, want map[string]any) pmetric.ResourceMetrics {
	t.Helper()
	var found []pmetric.ResourceMetrics
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		if attrsMatch(rm.Resource().Attributes(), want) {
			found = append(found, rm)
		}
	}
	require.Len(t, found, 1, "resources matching %v", want)
	return found[0]
}

// attrsMatch checks attribute values; a nil value means "absent".
func attrsMatch(attrs pcommon.Map, want map[string]any) bool {
	for k, v := range want {
		got, ok := attrs.Get(k)
		if v == nil {
			if ok {
				return false
			}
			continue
		}
		if !ok || got.AsRaw() != v {
			return false
		}
	}
	return true
}

func findMetric(rm pmetric.ResourceMetrics, name string) (pmetric.Metric, bool) {
	for i := 0; i < rm.ScopeMetrics().Len(); i++ {
		ms := rm.ScopeMetrics().At(i).Metrics()
		for j := 0; j < ms.Len(); j++ {
			if ms.At(j).Name() == name {
				return ms.At(j), true
			}
		}
	}
	return pmetric.Metric{}, false
}

func dataPoints(m pmetric.Metric) pmetric.NumberDataPointSlice {
	if m.Type() == pmetric.MetricTypeSum {
		return m.Sum().DataPoints()
	}
	return m.Gauge().DataPoints()
}

// point returns the value of the one data point of a metric whose
// attributes include want.
func point(t *testing.T, rm pmetric.ResourceMetrics, name string, want map[string]any) float64 {
	t.Helper()
	m, ok := findMetric(rm, name)
	require.True(t, ok, "metric %s missing", name)
	dps := dataPoints(m)
	var vals []float64
	for i := 0; i < dps.Len(); i++ {
		dp := dps.At(i)
		if !attrsMatch(dp.Attributes(), want) {
			continue
		}
		if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
			vals = append(vals, float64(dp.IntValue()))
		} else {
			vals = append(vals, dp.DoubleValue())
		}
	}
	require.Len(t, vals, 1, "%s points with %v", name, want)
	return vals[0]
}

func countLogs(logs *observer.ObservedLogs, msgPrefix string) int {
	n := 0
	for _, e := range logs.All() {
		if len(e.Message) >= len(msgPrefix) && e.Message[:len(msgPrefix)] == msgPrefix {
			n++
		}
	}
	return n
}

var errNoLibrary = errors.New("nvml init: ERROR_LIBRARY_NOT_FOUND")
