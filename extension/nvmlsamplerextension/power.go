// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlsamplerextension // import "github.com/gpubuild/otelcol-gpubuild/extension/nvmlsamplerextension"

import (
	"slices"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpubuild/otelcol-gpubuild/internal/gpucost"
	"github.com/gpubuild/otelcol-gpubuild/internal/nvmlapi"
)

// powerBin is the spacing of the kept power curve: the energy counter
// itself moves in steps of about 100 ms, so a finer curve adds memory, not
// accuracy. powerBinsPerSecond sizes the ring.
const (
	powerBin           = 100 * time.Millisecond
	powerBinsPerSecond = 10
)

// powerCurve turns the driver's power readings (NVML_TOTAL_POWER_SAMPLES,
// about every 20 ms, each the power of the period since the previous one)
// into the integral gpucost.PowerSample holds, one point per powerBin and
// one at the newest reading of each sampling.
type powerCurve struct {
	ring     *ring[gpucost.PowerSample]
	off      bool
	lastTs   uint64  // newest reading taken, NVML's lastSeenTimeStamp
	joules   float64 // the integral up to lastTs
	pushedTs uint64  // the newest point in the ring
}

func newPowerCurve(cfg *Config, off bool) *powerCurve {
	capacity := 2*cfg.ticks() + int(cfg.Retention.Seconds()*powerBinsPerSecond)
	return &powerCurve{off: off, ring: newRing(capacity, func(p *gpucost.PowerSample) time.Time { return p.T })}
}

// span copies the curve over the counter reads of a window: the energy
// of the window's ends is placed between those reads.
func (c *powerCurve) span(energy []gpucost.EnergySample) []gpucost.PowerSample {
	if len(energy) == 0 {
		return nil
	}
	return c.ring.span(energy[0].T, energy[len(energy)-1].T)
}

// samplePower takes the readings since the last sampling. A reading more
// than gpucost.MaxPowerGap after the previous one starts the curve anew
// (the driver's buffer of about 2.4 s overflowed): the hole shows as a gap
// between two points, across which gpucost interpolates linearly.
func (s *sampler) samplePower(g *gpuRing) {
	c := g.power
	vt, samples, ret := g.dev.GetSamples(nvml.TOTAL_POWER_SAMPLES, c.lastTs)
	switch {
	case ret == nvml.ERROR_NOT_FOUND:
		return
	case ret != nvml.SUCCESS:
		s.ok(g, "power samples", ret, &c.off)
		return
	}
	slices.SortFunc(samples, func(a, b nvml.Sample) int { return compareUint64(a.TimeStamp, b.TimeStamp) })
	maxGapUs := uint64(gpucost.MaxPowerGap.Microseconds())
	for i := range samples {
		ts := samples[i].TimeStamp
		mw, ok := nvmlapi.SampleValue(vt, samples[i].SampleValue)
		if ts <= c.lastTs || !ok {
			continue
		}
		if c.lastTs == 0 || ts-c.lastTs > maxGapUs {
			if c.pushedTs != c.lastTs && c.lastTs != 0 {
				c.push(c.lastTs)
			}
			c.lastTs = ts
			c.push(ts)
			continue
		}
		c.joules += mw / 1000 * float64(ts-c.lastTs) / 1e6
		c.lastTs = ts
		if ts-c.pushedTs >= uint64(powerBin.Microseconds()) {
			c.push(ts)
		}
	}
	if c.pushedTs != c.lastTs {
		c.push(c.lastTs)
	}
}

func (c *powerCurve) push(ts uint64) {
	c.ring.push(gpucost.PowerSample{T: time.UnixMicro(int64(ts)), Joules: c.joules})
	c.pushedTs = ts
}
