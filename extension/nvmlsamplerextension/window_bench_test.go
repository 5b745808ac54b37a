// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlsamplerextension

import (
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/gpubuild/otelcol-gpubuild/internal/gpucost"
)

// BenchmarkRunFigures is what one counted run costs the connector: the
// copy of a 30-minute window from a full ring at the default settings (one
// GPU: 1,800 energy and memory samples, 10,800 driver utilization samples)
// and its energy, busy time and peak memory.
func BenchmarkRunFigures(b *testing.B) {
	cfg := createDefaultConfig()
	s := newSamplerWith(cfg, zap.NewNop(), nil, time.Now)
	start := time.Unix(1_800_000_000, 0)
	ticks := cfg.ticks()
	g := &gpuRing{
		energy: newRing(ticks, func(e *gpucost.EnergySample) time.Time { return e.T }),
		util:   newRing(ticks+int(cfg.Retention.Seconds()*driverSamplesPerSecond), func(u *gpucost.UtilSample) time.Time { return u.T }),
		mem:    newRing(ticks, func(m *gpucost.MemSample) time.Time { return m.T }),
	}
	for i := range ticks {
		t := start.Add(time.Duration(i) * time.Second)
		g.energy.push(gpucost.EnergySample{T: t, MilliJoules: float64(i) * 300_000})
		g.mem.push(gpucost.MemSample{T: t, Procs: []gpucost.ProcMem{{PID: 42, Bytes: uint64(i) << 20}, {PID: 43, Bytes: 1 << 30}}})
		for k := range 6 {
			g.util.push(gpucost.UtilSample{T: t.Add(time.Duration(k) * time.Second / 6), Percent: float64(i % 100)})
		}
	}
	s.gpus = []*gpuRing{g}
	s.lastSample = start.Add(time.Duration(ticks) * time.Second)
	w := gpucost.Window{From: start.Add(2 * time.Minute), To: start.Add(32 * time.Minute)}
	b.ReportAllocs()
	for b.Loop() {
		series := s.Samples(w.From, w.To)
		if _, r := gpucost.Energy(series[0].Energy, series[0].Power, w, s.MaxGap()); r != gpucost.Covered {
			b.Fatal(r)
		}
		if _, r := gpucost.BusyTime(series[0].Util, w, s.MaxGap()); r != gpucost.Covered {
			b.Fatal(r)
		}
		if _, found, r := gpucost.PeakMemory(series[0].Memory, 42, w, s.MaxGap()); r != gpucost.Covered || !found {
			b.Fatal(r)
		}
	}
}
