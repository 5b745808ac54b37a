// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlreceiver

import (
	"fmt"
	"math"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/scraper/scrapererror"
)

func TestScrapeEveryMetricOfEightGPUs(t *testing.T) {
	srv := newMockServer()
	env := newTestEnv(t, defaultTestConfig(), loaderOf(srv))

	md, err := env.scrape(t)
	require.NoError(t, err)
	require.Equal(t, 8, md.ResourceMetrics().Len())

	for i := range 8 {
		d := gpu(srv, i)
		rm := resourceFor(t, md, map[string]any{"gpu.index": int64(i)})
		res := rm.Resource().Attributes().AsRaw()
		assert.Equal(t, d.UUID, res["hw.id"])
		assert.Equal(t, "Mock NVIDIA A100-SXM4-40GB", res["hw.model"])
		assert.Equal(t, fmt.Sprintf("00000000:%02X:00.0", 0x10+i), res["gpu.pci.bus_id"])
		assert.Equal(t, "550.54.15", res["hw.driver_version"])
		assert.Equal(t, "gpu", res["hw.type"])
		assert.Equal(t, "NVIDIA", res["hw.vendor"])
		assert.NotEmpty(t, res["host.name"])
		assert.NotContains(t, res, "gpu.mig.uuid")

		fi := float64(i)
		// GPU samples 10+i, 20+i, 30+i percent average to 20+i.
		assert.InDelta(t, (20+fi)/100, point(t, rm, "hw.gpu.utilization", nil), 1e-9)
		// Memory samples 5+i, 15+i percent average to 10+i.
		assert.InDelta(t, (10+fi)/100, point(t, rm, "gpu.memory.controller.utilization", nil), 1e-9)

		used := float64(i+1) * (1 << 30)
		assert.Equal(t, used, point(t, rm, "hw.gpu.memory.usage", nil))
		assert.Equal(t, float64(512<<20), point(t, rm, "gpu.memory.reserved", nil))
		assert.Equal(t, float64(40<<30), point(t, rm, "hw.gpu.memory.limit", nil))
		assert.InDelta(t, used/float64(40<<30), point(t, rm, "hw.gpu.memory.utilization", nil), 1e-12)

		assert.Equal(t, 40+fi, point(t, rm, "hw.temperature", nil))
		assert.InDelta(t, 200+1.5*fi, point(t, rm, "hw.power", nil), 1e-9)
		assert.InDelta(t, 400.0, point(t, rm, "gpu.power.limit", nil), 1e-9)
		assert.InDelta(t, 123456.789+fi/1000, point(t, rm, "hw.energy", nil), 1e-6)

		assert.Equal(t, (1000+fi)*1e6, point(t, rm, "gpu.clock.frequency", map[string]any{"gpu.clock.type": "sm"}))
		assert.Equal(t, 1215e6, point(t, rm, "gpu.clock.frequency", map[string]any{"gpu.clock.type": "memory"}))
		assert.Equal(t, (1100+fi)*1e6, point(t, rm, "gpu.clock.frequency", map[string]any{"gpu.clock.type": "graphics"}))

		assert.Equal(t, 3*fi, point(t, rm, "hw.errors", map[string]any{"error.type": "corrected"}))
		assert.Equal(t, float64(i%2), point(t, rm, "hw.errors", map[string]any{"error.type": "uncorrected"}))

		// Supported: gpu_idle, sw_power_cap, hw_slowdown, sw_thermal_slowdown;
		// even GPUs are power capped.
		powerCapped := 0.0
		if i%2 == 0 {
			powerCapped = 1
		}
		assert.Equal(t, powerCapped, point(t, rm, "gpu.clock.throttled", map[string]any{"gpu.clock.throttle_reason": "sw_power_cap"}))
		for _, r := range []string{"gpu_idle", "hw_slowdown", "sw_thermal_slowdown"} {
			assert.Equal(t, 0.0, point(t, rm, "gpu.clock.throttled", map[string]any{"gpu.clock.throttle_reason": r}))
		}
		throttled, _ := findMetric(rm, "gpu.clock.throttled")
		assert.Equal(t, 4, throttled.Gauge().DataPoints().Len(), "only supported reasons")

		assert.Equal(t, (1000+fi)*1024, point(t, rm, "gpu.pcie.throughput", map[string]any{"network.io.direction": "transmit"}))
		assert.Equal(t, (2000+fi)*1024, point(t, rm, "gpu.pcie.throughput", map[string]any{"network.io.direction": "receive"}))
	}
}

func TestMetricUnitsAndTypes(t *testing.T) {
	env := newTestEnv(t, defaultTestConfig(), loaderOf(newMockServer()))
	md, err := env.scrape(t)
	require.NoError(t, err)
	rm := md.ResourceMetrics().At(0)

	want := map[string]struct {
		unit      string
		typ       pmetric.MetricType
		monotonic bool
	}{
		"hw.gpu.utilization":                {"1", pmetric.MetricTypeGauge, false},
		"gpu.memory.controller.utilization": {"1", pmetric.MetricTypeGauge, false},
		"hw.gpu.memory.usage":               {"By", pmetric.MetricTypeSum, false},
		"hw.gpu.memory.utilization":         {"1", pmetric.MetricTypeGauge, false},
		"gpu.memory.reserved":               {"By", pmetric.MetricTypeSum, false},
		"hw.gpu.memory.limit":               {"By", pmetric.MetricTypeSum, false},
		"hw.temperature":                    {"Cel", pmetric.MetricTypeGauge, false},
		"hw.power":                          {"W", pmetric.MetricTypeGauge, false},
		"gpu.power.limit":                   {"W", pmetric.MetricTypeGauge, false},
		"hw.energy":                         {"J", pmetric.MetricTypeSum, true},
		"gpu.clock.frequency":               {"Hz", pmetric.MetricTypeGauge, false},
		"hw.errors":                         {"{error}", pmetric.MetricTypeSum, true},
		"gpu.clock.throttled":               {"1", pmetric.MetricTypeGauge, false},
		"gpu.pcie.throughput":               {"By/s", pmetric.MetricTypeGauge, false},
	}
	for name, w := range want {
		m, ok := findMetric(rm, name)
		require.True(t, ok, name)
		assert.Equal(t, w.unit, m.Unit(), name)
		require.Equal(t, w.typ, m.Type(), name)
		if w.typ == pmetric.MetricTypeSum {
			assert.Equal(t, w.monotonic, m.Sum().IsMonotonic(), name)
			assert.Equal(t, pmetric.AggregationTemporalityCumulative, m.Sum().AggregationTemporality(), name)
		}
	}
}

func TestUtilizationAveragesOnlyNewSamples(t *testing.T) {
	srv := newMockServer()
	// One GPU whose sample buffer grows between scrapes, like NVML's.
	buffer := []nvml.Sample{uintSample(100, 10), uintSample(200, 30), uintSample(300, 50)}
	var lastSeen []uint64
	d := gpu(srv, 0)
	d.GetSamplesFunc = func(kind nvml.SamplingType, last uint64) (nvml.ValueType, []nvml.Sample, nvml.Return) {
		if kind != nvml.GPU_UTILIZATION_SAMPLES {
			return 0, nil, nvml.ERROR_NOT_SUPPORTED
		}
		lastSeen = append(lastSeen, last)
		// Real NVML may hand back older samples too; the receiver must
		// filter them itself.
		return nvml.VALUE_TYPE_UNSIGNED_INT, buffer, nvml.SUCCESS
	}
	cfg := defaultTestConfig()
	cfg.Devices = []string{"0"}
	env := newTestEnv(t, cfg, loaderOf(srv))

	md, err := env.scrape(t)
	require.NoError(t, err)
	assert.InDelta(t, 0.30, point(t, md.ResourceMetrics().At(0), "hw.gpu.utilization", nil), 1e-9) // (10+30+50)/3

	buffer = append(buffer, uintSample(400, 90), uintSample(500, 70))
	md, err = env.scrape(t)
	require.NoError(t, err)
	assert.InDelta(t, 0.80, point(t, md.ResourceMetrics().At(0), "hw.gpu.utilization", nil), 1e-9) // (90+70)/2

	// No new sample: fall back to the instantaneous reading (90%).
	md, err = env.scrape(t)
	require.NoError(t, err)
	assert.InDelta(t, 0.90, point(t, md.ResourceMetrics().At(0), "hw.gpu.utilization", nil), 1e-9)

	assert.Equal(t, []uint64{0, 300, 500}, lastSeen)
}

func TestAverageSamplesValueTypes(t *testing.T) {
	double := func(ts uint64, v float64) nvml.Sample {
		s := nvml.Sample{TimeStamp: ts}
		var raw [8]byte
		bits := math.Float64bits(v)
		for k := range 8 {
			raw[k] = byte(bits >> (8 * k))
		}
		s.SampleValue = raw
		return s
	}
	avg, newest, ok := averageSamples(nvml.VALUE_TYPE_DOUBLE, []nvml.Sample{double(5, 12.5), double(9, 37.5), double(3, 99)}, 4)
	require.True(t, ok)
	assert.InDelta(t, 25.0, avg, 1e-12) // the sample at ts 3 is older than lastTs 4
	assert.Equal(t, uint64(9), newest)

	_, newest, ok = averageSamples(nvml.VALUE_TYPE_UNSIGNED_INT, []nvml.Sample{uintSample(2, 50)}, 4)
	assert.False(t, ok)
	assert.Equal(t, uint64(4), newest, "lastTs is kept when nothing is new")

	_, _, ok = averageSamples(nvml.VALUE_TYPE_COUNT, []nvml.Sample{uintSample(8, 50)}, 4)
	assert.False(t, ok, "unknown value types are ignored")
}

func TestUtilizationFallsBackWhenSamplesUnsupported(t *testing.T) {
	srv := newMockServer()
	for i := range 8 {
		gpu(srv, i).GetSamplesFunc = func(nvml.SamplingType, uint64) (nvml.ValueType, []nvml.Sample, nvml.Return) {
			return 0, nil, nvml.ERROR_NOT_SUPPORTED
		}
	}
	env := newTestEnv(t, defaultTestConfig(), loaderOf(srv))
	for range 3 {
		md, err := env.scrape(t)
		require.NoError(t, err)
		rm := resourceFor(t, md, map[string]any{"gpu.index": int64(4)})
		assert.InDelta(t, 0.90, point(t, rm, "hw.gpu.utilization", nil), 1e-9)
		assert.InDelta(t, 0.80, point(t, rm, "gpu.memory.controller.utilization", nil), 1e-9)
	}
	// Two sample kinds x 8 GPUs, each said once in three scrapes.
	assert.Equal(t, 16, countLogs(env.logs, "GPU does not support a metric"))
}

func TestNotSupportedIsSkippedForThatGPUAndLoggedOnce(t *testing.T) {
	srv := newMockServer()
	gpu(srv, 3).GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) {
		return 0, nvml.ERROR_NOT_SUPPORTED
	}
	gpu(srv, 3).GetTotalEccErrorsFunc = func(nvml.MemoryErrorType, nvml.EccCounterType) (uint64, nvml.Return) {
		return 0, nvml.ERROR_NOT_SUPPORTED // ECC off
	}
	env := newTestEnv(t, defaultTestConfig(), loaderOf(srv))
	for range 3 {
		md, err := env.scrape(t)
		require.NoError(t, err, "unsupported metrics are not scrape errors")
		rm := resourceFor(t, md, map[string]any{"gpu.index": int64(3)})
		_, has := findMetric(rm, "hw.temperature")
		assert.False(t, has)
		_, has = findMetric(rm, "hw.errors")
		assert.False(t, has)
		assert.Equal(t, 42.0, point(t, resourceFor(t, md, map[string]any{"gpu.index": int64(2)}), "hw.temperature", nil))
	}
	// temperature, corrected and uncorrected ECC: three features, once each.
	assert.Equal(t, 3, countLogs(env.logs, "GPU does not support a metric"))
}

func TestGPULostIsPartialErrorAndOtherGPUsKeepReporting(t *testing.T) {
	srv := newMockServer()
	// GPU 2 is gone entirely; GPU 5 falls off after its memory was read.
	g2 := gpu(srv, 2)
	g2.GetSamplesFunc = func(nvml.SamplingType, uint64) (nvml.ValueType, []nvml.Sample, nvml.Return) {
		return 0, nil, nvml.ERROR_GPU_IS_LOST
	}
	g5 := gpu(srv, 5)
	g5.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 0, nvml.ERROR_GPU_IS_LOST }
	g5.GetPowerUsageFunc = func() (uint32, nvml.Return) {
		t.Error("no NVML call after the GPU is lost")
		return 0, nvml.ERROR_GPU_IS_LOST
	}
	env := newTestEnv(t, defaultTestConfig(), loaderOf(srv))

	md, err := env.scrape(t)
	require.Error(t, err)
	assert.True(t, scrapererror.IsPartialScrapeError(err))
	assert.ErrorContains(t, err, g2.UUID)
	assert.ErrorContains(t, err, g5.UUID)
	assert.ErrorContains(t, err, "ERROR_GPU_IS_LOST")

	// GPU 2 produced nothing; GPU 5 what it read before it was lost.
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		idx, _ := md.ResourceMetrics().At(i).Resource().Attributes().Get("gpu.index")
		assert.NotEqual(t, int64(2), idx.Int())
	}
	rm5 := resourceFor(t, md, map[string]any{"gpu.index": int64(5)})
	assert.InDelta(t, 0.25, point(t, rm5, "hw.gpu.utilization", nil), 1e-9)
	_, has := findMetric(rm5, "hw.temperature")
	assert.False(t, has)
	_, has = findMetric(rm5, "hw.power")
	assert.False(t, has)
	// GPU 6 did not receive GPU 5's leftovers and has its full set.
	rm6 := resourceFor(t, md, map[string]any{"gpu.index": int64(6)})
	assert.Equal(t, 46.0, point(t, rm6, "hw.temperature", nil))
	assert.InDelta(t, 0.26, point(t, rm6, "hw.gpu.utilization", nil), 1e-9)

	for _, i := range []int{0, 1, 3, 4, 6, 7} {
		rm := resourceFor(t, md, map[string]any{"gpu.index": int64(i)})
		assert.Equal(t, 40+float64(i), point(t, rm, "hw.temperature", nil))
	}
}

func TestOtherNVMLErrorsArePartialErrors(t *testing.T) {
	srv := newMockServer()
	gpu(srv, 1).GetPowerUsageFunc = func() (uint32, nvml.Return) { return 0, nvml.ERROR_UNKNOWN }
	env := newTestEnv(t, defaultTestConfig(), loaderOf(srv))
	md, err := env.scrape(t)
	require.Error(t, err)
	assert.True(t, scrapererror.IsPartialScrapeError(err))
	assert.ErrorContains(t, err, "hw.power")
	rm := resourceFor(t, md, map[string]any{"gpu.index": int64(1)})
	assert.Equal(t, 41.0, point(t, rm, "hw.temperature", nil), "the GPU's other metrics are kept")
}

func TestDevicesFilter(t *testing.T) {
	srv := newMockServer()
	cfg := defaultTestConfig()
	cfg.Devices = []string{"1", gpu(srv, 5).UUID, "9"}
	env := newTestEnv(t, cfg, loaderOf(srv))
	md, err := env.scrape(t)
	require.NoError(t, err)
	require.Equal(t, 2, md.ResourceMetrics().Len())
	resourceFor(t, md, map[string]any{"gpu.index": int64(1)})
	resourceFor(t, md, map[string]any{"gpu.index": int64(5), "hw.id": gpu(srv, 5).UUID})
	assert.Equal(t, 1, countLogs(env.logs, "devices: no GPU with this index"))
}

func TestDisabledMetricsAreNotQueried(t *testing.T) {
	srv := newMockServer()
	for i := range 8 {
		gpu(srv, i).GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) {
			t.Error("temperature queried although disabled")
			return 0, nvml.ERROR_UNKNOWN
		}
	}
	cfg := defaultTestConfig()
	cfg.Metrics.HwTemperature.Enabled = false
	env := newTestEnv(t, cfg, loaderOf(srv))
	_, err := env.scrape(t)
	require.NoError(t, err)
}

func TestOldDriverWithoutNewerSymbols(t *testing.T) {
	srv := newMockServer()
	missing := map[string]bool{
		"nvmlDeviceGetMemoryInfo_v2":               true,
		"nvmlDeviceGetCurrentClocksEventReasons":   true,
		"nvmlDeviceGetSupportedClocksEventReasons": true,
		"nvmlDeviceGetTotalEnergyConsumption":      true,
	}
	srv.LookupSymbolFunc = func(name string) error {
		if missing[name] {
			return fmt.Errorf("undefined symbol %s", name)
		}
		return nil
	}
	for i := range 8 {
		d := gpu(srv, i)
		// Calling these on a driver that lacks them would kill the process.
		d.GetMemoryInfo_v2Func = nil
		d.GetCurrentClocksEventReasonsFunc = nil
		d.GetSupportedClocksEventReasonsFunc = nil
		d.GetTotalEnergyConsumptionFunc = nil
		d.GetSupportedClocksThrottleReasonsFunc = func() (uint64, nvml.Return) { return nvml.ClocksThrottleReasonHwSlowdown, nvml.SUCCESS }
		d.GetCurrentClocksThrottleReasonsFunc = func() (uint64, nvml.Return) { return nvml.ClocksThrottleReasonHwSlowdown, nvml.SUCCESS }
	}
	env := newTestEnv(t, defaultTestConfig(), loaderOf(srv))
	md, err := env.scrape(t)
	require.NoError(t, err)
	rm := resourceFor(t, md, map[string]any{"gpu.index": int64(0)})
	assert.Equal(t, float64(1<<30), point(t, rm, "hw.gpu.memory.usage", nil))
	_, has := findMetric(rm, "gpu.memory.reserved")
	assert.False(t, has, "v1 memory info has no reserved")
	assert.Equal(t, 1.0, point(t, rm, "gpu.clock.throttled", map[string]any{"gpu.clock.throttle_reason": "hw_slowdown"}))
	_, has = findMetric(rm, "hw.energy")
	assert.False(t, has)
}
