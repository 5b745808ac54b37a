// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlreceiver

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpubuild/otelcol-gpubuild/receiver/nvmlreceiver/fakenvml"
)

// The GPM metrics, in the order of fakenvml.GPMStep.Values.
var gpmMetricNames = [4]string{"gpu.sm.activity", "gpu.sm.occupancy", "gpu.tensor.activity", "gpu.dram.bandwidth.utilization"}

// gpmScenario: GPU 0 (an H100) has GPM with a step at 2.5 s; GPU 1 (an
// A100) has none; GPU 2 is in MIG mode with two GPU instances (GI 1 with
// two compute instances, GI 2 with one), each with its own GPM steps, and
// the whole GPU's.
func gpmScenario() fakenvml.Scenario {
	gpu := func(i int, name string) fakenvml.GPU {
		return fakenvml.GPU{
			UUID: fmt.Sprintf("GPU-69a00000-0000-4000-8000-00000000000%d", i), Name: name, BusID: fmt.Sprintf("00000000:%02X:00.0", 0x20+i),
			MemTotal: 80 << 30, PowerLimitMW: 700_000, UtilGPU: 50,
		}
	}
	g0 := gpu(0, "NVIDIA H100 80GB HBM3")
	g0.GPM = fakenvml.GPMOn
	g0.GPMSteps = []fakenvml.GPMStep{
		{GPUInstance: -1, FromUs: 0, Values: [4]float64{40, 30, 10, 20}},
		{GPUInstance: -1, FromUs: 2_500_000, Values: [4]float64{80, 60, 50, 70}},
	}
	g1 := gpu(1, "NVIDIA A100-SXM4-80GB")
	g2 := gpu(2, "NVIDIA H100 80GB HBM3")
	g2.GPM = fakenvml.GPMOn
	g2.MIGMode = true
	g2.MIG = []fakenvml.MIGDevice{
		{Slot: 0, UUID: "MIG-69a00000-0000-4000-8000-000000000001", GPUInstanceID: 1, ComputeID: 0, MemTotal: 40 << 30},
		{Slot: 1, UUID: "MIG-69a00000-0000-4000-8000-000000000002", GPUInstanceID: 1, ComputeID: 1, MemTotal: 40 << 30},
		{Slot: 2, UUID: "MIG-69a00000-0000-4000-8000-000000000003", GPUInstanceID: 2, ComputeID: 0, MemTotal: 20 << 30},
	}
	g2.GPMSteps = []fakenvml.GPMStep{
		{GPUInstance: -1, FromUs: 0, Values: [4]float64{55, 45, 25, 35}},
		{GPUInstance: 1, FromUs: 0, Values: [4]float64{90, 70, 60, 50}},
		{GPUInstance: 1, FromUs: 3_000_000, Values: [4]float64{10, 5, 0, 15}},
		{GPUInstance: 2, FromUs: 0, Values: [4]float64{20, 12.5, 7.25, 33.3}},
		{GPUInstance: 2, FromUs: 1_600_000, Values: [4]float64{66.6, 44.4, 22.2, 11.1}},
	}
	return fakenvml.Scenario{Driver: fakeDriver, GPUs: []fakenvml.GPU{g0, g1, g2}}
}

// gpmPoints picks the GPM points out of a scrape: GPU UUID / GPU instance
// id (-1: the whole GPU) / MIG UUID / metric.
func gpmPoints(t *testing.T, md pmetric.Metrics) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		attrs := rm.Resource().Attributes()
		id, _ := attrs.Get("hw.id")
		gi, mig := int64(-1), ""
		if v, ok := attrs.Get("gpu.mig.gpu_instance_id"); ok {
			gi = v.Int()
		}
		if v, ok := attrs.Get("gpu.mig.uuid"); ok {
			mig = v.Str()
		}
		for j := 0; j < rm.ScopeMetrics().Len(); j++ {
			ms := rm.ScopeMetrics().At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				if !strings.HasPrefix(m.Name(), "gpu.sm.") && m.Name() != "gpu.tensor.activity" && m.Name() != "gpu.dram.bandwidth.utilization" {
					continue
				}
				require.Equal(t, "1", m.Unit(), m.Name())
				require.Equal(t, pmetric.MetricTypeGauge, m.Type(), m.Name())
				require.Equal(t, 1, m.Gauge().DataPoints().Len(), m.Name())
				out[fmt.Sprintf("%s/%d/%s/%s", id.Str(), gi, mig, m.Name())] = m.Gauge().DataPoints().At(0).DoubleValue()
			}
		}
	}
	return out
}

// TestFakeNVMLGPM runs the receiver on the fake through four scrapes (fake
// clock 1, 2, 4 and 5 s) and compares each GPM point with the scenario's
// time-weighted mean over the interval between two scrapes: nothing on the
// first scrape, none for the GPU without GPM (said once), per GPU instance
// on the MIG GPU (on each of its compute instances' resources); every
// sample buffer is freed at shutdown.
func TestFakeNVMLGPM(t *testing.T) {
	sc := gpmScenario()
	clocks := []uint64{1_000_000, 2_000_000, 4_000_000, 5_000_000}
	var steps []childStep
	for _, c := range clocks {
		steps = append(steps, childStep{State: fakenvml.State{ClockUs: c}, Advance: 10 * time.Second})
	}
	res := runFake(t, sc, childScript{Steps: steps})
	require.NoError(t, res.err, "child process: %s", res.stderr)
	require.Len(t, res.scrapes, len(steps))

	for i := range steps {
		assert.Empty(t, res.scrapes[i].Err, "scrape %d", i)
		got := gpmPoints(t, res.metrics(t, i))
		want := map[string]float64{}
		if i > 0 {
			put := func(g fakenvml.GPU, gi int, mig string) {
				v := g.GPMMean(gi, clocks[i-1], clocks[i])
				for k, name := range gpmMetricNames {
					want[fmt.Sprintf("%s/%d/%s/%s", g.UUID, gi, mig, name)] = v[k] / 100
				}
			}
			put(sc.GPUs[0], -1, "")
			put(sc.GPUs[2], -1, "")
			for _, m := range sc.GPUs[2].MIG {
				put(sc.GPUs[2], int(m.GPUInstanceID), m.UUID)
			}
		}
		require.Len(t, got, len(want), "scrape %d: %v", i, got)
		for k, w := range want {
			g, ok := got[k]
			require.True(t, ok, "scrape %d: missing %s", i, k)
			assert.LessOrEqual(t, math.Abs(g-w), 1e-6, "scrape %d: %s: got %v, want %v", i, k, g, w)
		}
	}
	// The arithmetic itself, by hand: GPU 0 over [2 s, 4 s] is 0.5 s at
	// 40 % and 1.5 s at 80 % SM activity.
	assert.InDelta(t, (0.5*40+1.5*80)/2/100, gpmPoints(t, res.metrics(t, 2))[sc.GPUs[0].UUID+"/-1//gpu.sm.activity"], 1e-9)

	noGPM := res.logsWith("GPU has no GPM")
	require.Len(t, noGPM, 1, "one line for the GPU without GPM over four scrapes")
	assert.Equal(t, float64(1), noGPM[0]["gpu.index"])
	assert.Contains(t, res.report, "gpm_samples_live 0\n", "every GPM sample buffer freed at shutdown")
}
