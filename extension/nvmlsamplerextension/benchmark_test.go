// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlsamplerextension

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/gpubuild/otelcol-gpubuild/internal/nvmlapi"
	"github.com/gpubuild/otelcol-gpubuild/receiver/nvmlreceiver/fakenvml"
)

// BenchmarkSampling measures one sampling of every GPU through the fake
// NVML (the real dlopen/cgo boundary; a real driver's calls cost more, see
// the README): the energy counter, the driver's utilization samples (new
// ones about every 1/6 s, on the wall clock) and two processes' memory.
// core_%_per_gpu is the share of one core it takes per GPU at the default
// sampling_interval.
func BenchmarkSampling(b *testing.B) {
	for _, c := range []struct {
		n   int
		gpm bool
	}{{1, false}, {8, false}, {1, true}, {8, true}} {
		n := c.n
		name := fmt.Sprintf("gpus=%d", n)
		if c.gpm {
			name += ",gpm" // Hopper: a GPM sample and its metrics per sampling too
		}
		b.Run(name, func(b *testing.B) {
			start := uint64(time.Now().UnixMicro())
			sc := fakenvml.Scenario{Driver: "550.54.15", Realtime: true}
			for i := range n {
				g := fakenvml.GPU{
					UUID: fmt.Sprintf("GPU-be4c0000-0000-4000-8000-00000000000%d", i), Name: "NVIDIA H100 80GB HBM3",
					MemTotal: 80 << 30, EnergyMJ: 1_000_000, Power: []fakenvml.PowerStep{{FromUs: start, MW: 300_000}},
					Processes: []fakenvml.Process{{PID: 4242, UsedBytes: 3 << 30}, {PID: 4243, UsedBytes: 1 << 30}},
				}
				if c.gpm {
					g.GPM = fakenvml.GPMOn
					g.GPMSteps = []fakenvml.GPMStep{{GPUInstance: -1, FromUs: start, Values: [4]float64{50, 40, 30, 20}}}
				}
				for k := range 4000 {
					g.GPUSamples = append(g.GPUSamples, fakenvml.Sample{TimestampUs: start + uint64(k)*166_667, Percent: uint32(k % 100)})
				}
				sc.GPUs = append(sc.GPUs, g)
			}
			dir := b.TempDir()
			scPath := filepath.Join(dir, "scenario.txt")
			require.NoError(b, sc.WriteFile(scPath))
			b.Setenv(fakenvml.EnvScenario, scPath)
			b.Setenv(fakenvml.EnvState, filepath.Join(dir, "none"))
			lib, err := fakeLibrary()
			require.NoError(b, err)
			s := newSamplerWith(createDefaultConfig(), zap.NewNop(), nvmlapi.NewSystemLoader(nvml.WithLibraryPath(lib)), time.Now)
			defer func() { require.NoError(b, s.Shutdown(b.Context())) }()
			s.tick()
			require.Len(b, s.gpus, n)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				s.tick()
			}
			perGPU := float64(b.Elapsed().Nanoseconds()) / float64(b.N) / float64(n)
			b.ReportMetric(perGPU/float64(defaultSamplingInterval.Nanoseconds())*100, "core_%_per_gpu")
		})
	}
}
