// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package destinations

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/receiver/nvmlreceiver/fakenvml"
)

// latestGPUValue is the value of the newest point of a gauge or sum whose
// resource has hw.id = uuid; ok is false when there is none.
func (s *otlpSink) latestGPUValue(name, uuid string) (value float64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var newest uint64
	for _, md := range s.metrics {
		rms := md.ResourceMetrics()
		for i := 0; i < rms.Len(); i++ {
			if v, found := rms.At(i).Resource().Attributes().Get("hw.id"); !found || v.AsString() != uuid {
				continue
			}
			sms := rms.At(i).ScopeMetrics()
			for j := 0; j < sms.Len(); j++ {
				ms := sms.At(j).Metrics()
				for k := 0; k < ms.Len(); k++ {
					m := ms.At(k)
					if m.Name() != name {
						continue
					}
					var dps pmetric.NumberDataPointSlice
					switch m.Type() {
					case pmetric.MetricTypeGauge:
						dps = m.Gauge().DataPoints()
					case pmetric.MetricTypeSum:
						dps = m.Sum().DataPoints()
					default:
						continue
					}
					for p := 0; p < dps.Len(); p++ {
						dp := dps.At(p)
						if uint64(dp.Timestamp()) < newest {
							continue
						}
						newest = uint64(dp.Timestamp())
						value, ok = dp.DoubleValue(), true
						if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
							value = float64(dp.IntValue())
						}
					}
				}
			}
		}
	}
	return value, ok
}

// GPU metrics from the nvml receiver (a fake libnvidia-ml.so.1 with two
// GPUs) reach every store with each GPU's own values: the GPU identity
// (a resource attribute) keeps the two series apart in Prometheus too.
func TestGPUMetricsInEveryStore(t *testing.T) {
	dir := t.TempDir()
	libDir := filepath.Join(dir, "lib")
	require.NoError(t, os.Mkdir(libDir, 0o700))
	_, err := fakenvml.Build(libDir, binarytest.RepoRoot())
	require.NoError(t, err)
	sc := fakenvml.Scenario{Driver: "535.161.08"}
	for i := range 2 {
		sc.GPUs = append(sc.GPUs, fakenvml.GPU{
			UUID: fmt.Sprintf("GPU-de570000-0000-4000-8000-00000000000%d", i), Name: "NVIDIA A100-SXM4-80GB",
			BusID:    fmt.Sprintf("00000000:%02X:00.0", 0x07+i),
			MemTotal: uint64(40+40*i) << 30, MemUsed: 2 << 30, MemReserved: 256 << 20,
			Temperature: 51 + uint32(i), PowerMW: 250_500, PowerLimitMW: 400_000, EnergyMJ: 5_000_000,
			ClockSM: 1410, ClockMem: 1593, ClockGraphics: 1410, UtilGPU: 64, UtilMem: 20,
		})
	}
	scenarioPath := filepath.Join(dir, "scenario.txt")
	require.NoError(t, sc.WriteFile(scenarioPath))
	statePath := filepath.Join(dir, "state.txt")
	require.NoError(t, fakenvml.State{}.WriteFile(statePath))

	s := startStores(t)
	p := newCollectorPorts(t)
	env := slices.DeleteFunc(s.env(p, t.TempDir()), func(kv string) bool {
		return strings.HasPrefix(kv, "LD_LIBRARY_PATH=") || strings.HasPrefix(kv, "FAKE_NVML_")
	})
	env = append(env, "LD_LIBRARY_PATH="+libDir, fakenvml.EnvScenario+"="+scenarioPath, fakenvml.EnvState+"="+statePath,
		"GPUBUILD_GPU_COLLECTION_INTERVAL=1s")
	startCollector(t, p, env)

	type check struct {
		metric, prom string
		want         func(fakenvml.GPU) float64
	}
	checks := []check{
		{"hw.temperature", "hw_temperature_celsius", func(g fakenvml.GPU) float64 { return float64(g.Temperature) }},
		{"hw.gpu.memory.limit", "hw_gpu_memory_limit_bytes", func(g fakenvml.GPU) float64 { return float64(g.MemTotal) }},
	}
	var missing []string
	ok := binarytest.Eventually(2*time.Minute, func() bool {
		missing = nil
		for _, c := range checks {
			for _, g := range sc.GPUs {
				want := c.want(g)
				label := fmt.Sprintf("%s %s", c.metric, g.UUID)
				found := false
				for _, d := range s.cw.Datums() {
					if d.MetricName == c.metric && d.Dimensions["hw.id"] == g.UUID && d.Value != nil && *d.Value == want {
						found = true
					}
				}
				if !found {
					missing = append(missing, "cloudwatch: "+label)
				}
				for name, sink := range map[string]*otlpSink{"cloudwatch-otlp": s.cwOTLP, "otlp": s.otlp} {
					if v, ok := sink.latestGPUValue(c.metric, g.UUID); !ok || v != want {
						missing = append(missing, name+": "+label)
					}
				}
				for name, prom := range map[string]*prometheusServer{"prometheus": s.scrape, "prometheus-remote-write": s.remote} {
					samples, err := prom.Query(fmt.Sprintf(`%s{hw_id=%q}`, c.prom, g.UUID))
					if err != nil || len(samples) != 1 || samples[0].Value != want {
						missing = append(missing, fmt.Sprintf("%s: %s (%v, err %v)", name, label, samples, err))
					}
				}
			}
		}
		return len(missing) == 0
	})
	require.True(t, ok, "not in every store with the fake driver's values:\n%s", strings.Join(missing, "\n"))
}
