// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build gpu && cgo

package nvmlsamplerextension

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gpubuild/otelcol-gpubuild/internal/nvmlapi"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/resusage"
)

// TestSamplingCostOnRealGPU (make gpu-smoke) samples the machine's real
// GPUs at the shipped sampling_interval and measures the process's CPU per
// sampling per GPU: at most 1 % of one core at that interval. It logs what
// each GPU gives (the power readings turn the counter into a curve).
func TestSamplingCostOnRealGPU(t *testing.T) {
	cfg := createDefaultConfig()
	core, logs := observer.New(zapcore.InfoLevel)
	s := newSamplerWith(cfg, zap.New(core), nvmlapi.NewSystemLoader(), time.Now)
	t.Cleanup(func() { require.NoError(t, s.Shutdown(t.Context())) })
	s.tick()
	require.NotEmpty(t, s.gpus, "no GPU: %v", logs.All())

	const n = 15
	tick := time.NewTicker(cfg.SamplingInterval)
	defer tick.Stop()
	var cpu time.Duration
	for range n {
		<-tick.C
		c0 := processCPU(t)
		s.tick()
		cpu += processCPU(t) - c0
	}
	perGPU := cpu / time.Duration(n*len(s.gpus))
	share := float64(perGPU) / float64(cfg.SamplingInterval) * 100
	t.Logf("%d GPU(s), %d samplings at %s: %v of CPU per sampling per GPU, %.3f %% of one core per GPU",
		len(s.gpus), n, cfg.SamplingInterval, perGPU, share)
	for _, g := range s.gpus {
		if n := g.power.ring.n; n > 1 && g.energy.n > 1 {
			// The driver's readings against its counter over the same span,
			// and how far the newest reading is behind the host clock.
			first, last := g.power.ring.at(0), g.power.ring.at(n-1)
			e := g.energy.span(first.T, last.T)
			t.Logf("GPU %d: power readings integrate to %.1f J from %s to %s, the counter %.1f J over %s to %s; newest reading %v before now",
				g.index, last.Joules-first.Joules, first.T.Format("15:04:05.000"), last.T.Format("15:04:05.000"),
				(e[len(e)-1].MilliJoules-e[0].MilliJoules)/1000, e[0].T.Format("15:04:05.000"), e[len(e)-1].T.Format("15:04:05.000"),
				time.Since(last.T))
		}
		t.Logf("GPU %d %s: energy reads %d, utilization samples %d, process lists %d, power curve points %d (power readings off: %v)",
			g.index, g.uuid, g.energy.n, g.util.n, g.mem.n, g.power.ring.n, g.power.off)
	}
	for _, e := range logs.All() {
		t.Logf("log: %s %v", e.Message, e.ContextMap())
	}
	require.LessOrEqual(t, share, 1.0, "sampling must cost at most 1 %% of one core per GPU at the shipped interval")
}

func processCPU(t *testing.T) time.Duration {
	d, err := resusage.ProcessCPU()
	require.NoError(t, err)
	return d
}
