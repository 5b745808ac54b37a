// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlsamplerextension

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gpubuild/otelcol-gpubuild/internal/gpucost"
	"github.com/gpubuild/otelcol-gpubuild/internal/nvmlapi"
	"github.com/gpubuild/otelcol-gpubuild/receiver/nvmlreceiver/fakenvml"
)

// fakeLibrary builds the fake libnvidia-ml.so.1 every test in this binary
// loads, once: a process binds NVML's symbols to one library, which then
// must stay loaded, so the first load keeps an NVML reference open for the
// life of the process. The fake reads a test's scenario at each nvmlInit
// that names another scenario file, so tests run one at a time.
var fakeLibrary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "nvmlsampler-fakenvml")
	if err != nil {
		return "", err
	}
	path, err := fakenvml.Build(dir, ".")
	if err != nil {
		return "", err
	}
	if ret := nvml.New(nvml.WithLibraryPath(path)).Init(); ret != nvml.SUCCESS {
		return "", fmt.Errorf("keeping the fake NVML loaded: %w", ret)
	}
	return path, nil
})

// fakeClock is the fake driver's clock (its state file) and the sampler's.
type fakeClock struct {
	t     *testing.T
	state string
	us    uint64
}

func (c *fakeClock) set(us uint64) {
	c.us = us
	require.NoError(c.t, fakenvml.State{ClockUs: us}.WriteFile(c.state))
}

func (c *fakeClock) now() time.Time { return time.UnixMicro(int64(c.us)) }

// startFake writes sc, points the fake at it and returns a sampler on it
// (not started: the test drives tick itself) with its clock.
func startFake(t *testing.T, sc fakenvml.Scenario, cfg *Config) (*sampler, *fakeClock, *observer.ObservedLogs) {
	dir := t.TempDir()
	scPath := filepath.Join(dir, "scenario.txt")
	require.NoError(t, sc.WriteFile(scPath))
	clk := &fakeClock{t: t, state: filepath.Join(dir, "state.txt")}
	clk.set(1)
	t.Setenv(fakenvml.EnvScenario, scPath)
	t.Setenv(fakenvml.EnvState, clk.state)
	fakeLib, err := fakeLibrary()
	require.NoError(t, err)
	core, logs := observer.New(zapcore.DebugLevel)
	s := newSamplerWith(cfg, zap.New(core), nvmlapi.NewSystemLoader(nvml.WithLibraryPath(fakeLib)), clk.now)
	t.Cleanup(func() { require.NoError(t, s.Shutdown(t.Context())) })
	return s, clk, logs
}

const (
	sec  = uint64(1_000_000)
	half = sec / 2
)

// costScenario: GPU 0 draws 200 W from 1 s and 300 W from 3 s; its driver
// samples utilization every half second; process 4242 holds 1 GiB, 3 GiB
// from 2 s, 2 GiB from 4.2 s and leaves at 4.9 s. GPU 1 has no samples of
// its own: its utilization is the instantaneous reading.
func costScenario() fakenvml.Scenario {
	util := []uint32{10, 20, 20, 80, 80, 80, 50, 50, 50} // at 1.0, 1.5, ..., 5.0 s
	g0 := fakenvml.GPU{
		UUID: "GPU-c0570000-0000-4000-8000-000000000000", Name: "NVIDIA H100 80GB HBM3", BusID: "00000000:18:00.0",
		MemTotal: 80 << 30, EnergyMJ: 5_000_000, PowerLimitMW: 700_000,
		Power: []fakenvml.PowerStep{{FromUs: sec, MW: 200_000}, {FromUs: 3 * sec, MW: 300_000}},
		ProcessMemory: []fakenvml.ProcessMemoryStep{
			{PID: 4242, FromUs: 0, Bytes: 1 << 30}, {PID: 4242, FromUs: 2 * sec, Bytes: 3 << 30},
			{PID: 4242, FromUs: 4*sec + sec/5, Bytes: 2 << 30}, {PID: 4242, FromUs: 4*sec + 9*sec/10, Bytes: 0},
		},
	}
	for i, u := range util {
		g0.GPUSamples = append(g0.GPUSamples, fakenvml.Sample{TimestampUs: sec + uint64(i)*half, Percent: u})
	}
	g1 := fakenvml.GPU{UUID: "GPU-c0570000-0000-4000-8000-000000000001", Name: "NVIDIA H100 80GB HBM3", BusID: "00000000:19:00.0",
		MemTotal: 80 << 30, EnergyMJ: 7_000, UtilGPU: 35, SamplesUnsupported: true, Power: []fakenvml.PowerStep{{FromUs: 0, MW: 100_000}}}
	return fakenvml.Scenario{Driver: "550.54.15", GPUs: []fakenvml.GPU{g0, g1}}
}

func near(t *testing.T, want, got float64) {
	t.Helper()
	assert.LessOrEqual(t, math.Abs(got-want), 1e-6*math.Abs(want), "want %v, got %v", want, got)
}

// TestSamplesGiveTheScenarioArithmetic samples the fake every half second
// from 1 s to 5 s and checks the figures of the window [1.25 s, 4.75 s]
// against the scenario worked out by hand.
func TestSamplesGiveTheScenarioArithmetic(t *testing.T) {
	cfg := createDefaultConfig()
	cfg.SamplingInterval = 500 * time.Millisecond
	s, clk, _ := startFake(t, costScenario(), cfg)
	s.tick() // loads NVML and takes the first samples at 1 µs
	require.Len(t, s.gpus, 2)
	for k := range 9 {
		clk.set(sec + uint64(k)*half)
		s.tick()
	}
	at := func(us uint64) time.Time { return time.UnixMicro(int64(us)) }
	w := gpucost.Window{From: at(sec + sec/4), To: at(4*sec + 3*sec/4)}
	series := s.Samples(w.From, w.To)
	require.Len(t, series, 2)
	g0, g1 := series[0], series[1]
	assert.Equal(t, 0, g0.Index)
	assert.Equal(t, "GPU-c0570000-0000-4000-8000-000000000001", g1.UUID)

	// 200 W for 1.75 s and 300 W for 1.75 s.
	j, r := gpucost.Energy(g0.Energy, g0.Power, w, s.MaxGap())
	require.Equal(t, gpucost.Covered, r)
	near(t, 875, j)
	// 0.25 s at 20 %, 0.5 s at 20 %, 1.5 s at 80 %, 1.25 s at 50 %.
	busy, r := gpucost.BusyTime(g0.Util, w, s.MaxGap())
	require.Equal(t, gpucost.Covered, r)
	near(t, 0.05+0.1+1.2+0.625, busy)
	peak, found, r := gpucost.PeakMemory(g0.Memory, 4242, w, s.MaxGap())
	require.Equal(t, gpucost.Covered, r)
	require.True(t, found)
	assert.Equal(t, uint64(3<<30), peak)

	// GPU 1: 100 W throughout; utilization from the instantaneous 35 %.
	j, r = gpucost.Energy(g1.Energy, g1.Power, w, s.MaxGap())
	require.Equal(t, gpucost.Covered, r)
	near(t, 350, j)
	busy, r = gpucost.BusyTime(g1.Util, w, s.MaxGap())
	require.Equal(t, gpucost.Covered, r)
	near(t, 0.35*3.5, busy)
	_, found, _ = gpucost.PeakMemory(g1.Memory, 4242, w, s.MaxGap())
	assert.False(t, found)

	// A window that has just ended is sampled on demand: at 5.3 s, the
	// window up to 5.2 s is covered without waiting for the next tick.
	clk.set(5*sec + 3*sec/10)
	w2 := gpucost.Window{From: at(4 * sec), To: at(5*sec + sec/5)}
	series = s.Samples(w2.From, w2.To)
	j, r = gpucost.Energy(series[0].Energy, series[0].Power, w2, s.MaxGap())
	require.Equal(t, gpucost.Covered, r)
	near(t, 300*1.2, j)
	// A window not yet ended is not covered: no guess.
	series = s.Samples(w2.From, at(6*sec))
	_, r = gpucost.Energy(series[0].Energy, series[0].Power, gpucost.Window{From: w2.From, To: at(6 * sec)}, s.MaxGap())
	assert.Equal(t, gpucost.NotCovered, r)
}

// TestLostGPULeavesAGap: while GPU 0 is lost the sampler skips it, so a
// window across the gap gets no energy or memory figure.
func TestLostGPULeavesAGap(t *testing.T) {
	cfg := createDefaultConfig()
	cfg.SamplingInterval = 500 * time.Millisecond
	cfg.InitRetryInterval = 500 * time.Millisecond
	s, clk, logs := startFake(t, costScenario(), cfg)
	s.tick()
	for k := range 3 {
		clk.set(sec + uint64(k)*half)
		s.tick()
	}
	require.NoError(t, fakenvml.State{ClockUs: 2*sec + half, Lost: []int{0}}.WriteFile(clk.state))
	clk.us = 2*sec + half
	s.tick()
	for _, us := range []uint64{3 * sec, 3*sec + half, 4 * sec} {
		require.NoError(t, fakenvml.State{ClockUs: us, Lost: []int{0}}.WriteFile(clk.state))
		clk.us = us
		s.tick()
	}
	// Back after 2.5 s without a sample of GPU 0: longer than the gap a busy
	// host is allowed (2 s at this interval).
	for k := range 3 {
		clk.set(4*sec + half + uint64(k)*half)
		s.tick()
	}
	assert.Equal(t, 1, logs.FilterMessageSnippet("GPU is lost").Len())
	assert.Equal(t, 1, logs.FilterMessageSnippet("lost GPU is back").Len())
	at := func(us uint64) time.Time { return time.UnixMicro(int64(us)) }
	across := gpucost.Window{From: at(sec + half), To: at(4*sec + half)}
	series := s.Samples(across.From, across.To)
	_, r := gpucost.Energy(series[0].Energy, series[0].Power, across, s.MaxGap())
	assert.Equal(t, gpucost.Gap, r)
	_, _, r = gpucost.PeakMemory(series[0].Memory, 4242, across, s.MaxGap())
	assert.Equal(t, gpucost.Gap, r)
	// Utilization comes from the driver's own samples, which the fake kept
	// while the GPU was away: they are taken when it is back.
	// GPU 1 was sampled throughout.
	_, r = gpucost.Energy(series[1].Energy, series[1].Power, across, s.MaxGap())
	assert.Equal(t, gpucost.Covered, r)
	// After it came back: covered again.
	after := gpucost.Window{From: at(4*sec + half + sec/10), To: at(5*sec + half)}
	series = s.Samples(after.From, after.To)
	j, r := gpucost.Energy(series[0].Energy, series[0].Power, after, s.MaxGap())
	require.Equal(t, gpucost.Covered, r)
	near(t, 300*0.9, j)
}

// TestDormantWithoutNVMLAndRetries: with no library the sampler answers
// with no samples, warns once, and loads NVML at a later attempt (here at a
// fixed interval: init_retry_max_interval is init_retry_interval).
func TestDormantWithoutNVMLAndRetries(t *testing.T) {
	cfg := createDefaultConfig()
	cfg.InitRetryInterval = time.Second
	cfg.InitRetryMaxInterval = time.Second
	cfg.SamplingInterval = 500 * time.Millisecond
	s, clk, logs := startFake(t, costScenario(), cfg)
	load := s.load
	attempts := 0
	s.load = func() (nvmlapi.Library, error) {
		attempts++
		if attempts < 3 {
			return nil, errors.New("libnvidia-ml.so.1: cannot open shared object file")
		}
		return load()
	}
	for k := range 5 {
		clk.set(sec + uint64(k)*half) // 1 s, 1.5 s, ... 3 s
		s.tick()
		if k < 4 {
			assert.Nil(t, s.Samples(clk.now().Add(-time.Second), clk.now()), "tick %d", k)
		}
		if k%2 == 0 && k < 4 { // just after an attempt that failed
			assert.Equal(t, cfg.InitRetryInterval, s.nextWake(), "without NVML the loop sleeps until the next attempt (tick %d)", k)
		}
	}
	assert.Equal(t, 3, attempts) // at 1 s, 2 s and 3 s: once per init_retry_interval
	assert.Equal(t, cfg.SamplingInterval, s.nextWake(), "with GPUs the loop wakes every sampling interval")
	assert.Equal(t, 1, logs.FilterMessageSnippet("NVML is not available").Len())
	require.Len(t, s.Samples(clk.now(), clk.now()), 2)
}

// TestLoadRetriesBackOff drives the sampler's loop by hand on the fake
// clock, each time sleeping what the loop would: without NVML, or with
// NVML but no GPU, the attempts come 1, 2, 4, 8, 15 and 15 min apart, none
// in between; with init_retry_max_interval equal to init_retry_interval
// every minute. GPUs found reset the schedule: after a restart that fails
// again the next attempt is a minute later.
func TestLoadRetriesBackOff(t *testing.T) {
	minute := time.Minute
	backedOff := []time.Duration{minute, 2 * minute, 4 * minute, 8 * minute, 15 * minute, 15 * minute}
	noGPU := costScenario()
	noGPU.GPUs = nil
	for name, tc := range map[string]struct {
		maxInterval time.Duration
		sc          fakenvml.Scenario
		fail        bool // the library does not load; else it shows no GPU
		want        []time.Duration
	}{
		"no library":                 {maxInterval: 15 * minute, sc: costScenario(), fail: true, want: backedOff},
		"no GPU":                     {maxInterval: 15 * minute, sc: noGPU, want: backedOff},
		"max is init_retry_interval": {maxInterval: minute, sc: costScenario(), fail: true, want: slices.Repeat([]time.Duration{minute}, 6)},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := createDefaultConfig()
			cfg.SamplingInterval = minute // the loop's ticker never fires during the test
			cfg.InitRetryMaxInterval = tc.maxInterval
			s, clk, logs := startFake(t, tc.sc, cfg)
			load := s.load
			failing := tc.fail
			var attempts []time.Time
			s.load = func() (nvmlapi.Library, error) {
				if failing {
					attempts = append(attempts, clk.now())
					return nil, errors.New("libnvidia-ml.so.1: cannot open shared object file")
				}
				lib, err := load()
				if err != nil {
					return nil, err
				}
				return countingLibrary{lib, func() { attempts = append(attempts, clk.now()) }}, nil
			}
			gaps := func() []time.Duration {
				var out []time.Duration
				for i := 1; i < len(attempts); i++ {
					out = append(out, attempts[i].Sub(attempts[i-1]))
				}
				return out
			}
			// sleep moves the clock as the loop's ticker would and ticks,
			// after a tick a second earlier that must not try.
			sleep := func() {
				d := s.nextWake()
				n := len(attempts)
				clk.set(clk.us + uint64((d - time.Second).Microseconds()))
				s.tick()
				require.Len(t, attempts, n, "no attempt before the next is due")
				clk.set(clk.us + sec)
				s.tick()
			}
			require.NoError(t, s.Start(t.Context(), nil))
			for range tc.want {
				sleep()
			}
			assert.Equal(t, tc.want, gaps())
			assert.Empty(t, s.gpus)
			if !tc.fail {
				assert.Equal(t, 1, logs.FilterMessageSnippet("found no GPU").Len(), "one warning, not one per attempt")
				return
			}
			assert.Equal(t, 1, logs.FilterMessageSnippet("NVML is not available").Len(), "one warning, not one per attempt")

			failing = false
			sleep()
			require.Len(t, s.gpus, 2)
			assert.Equal(t, cfg.SamplingInterval, s.nextWake())
			require.NoError(t, s.Shutdown(t.Context()))
			failing = true
			attempts = nil
			require.NoError(t, s.Start(t.Context(), nil))
			sleep()
			sleep()
			assert.Equal(t, tc.want[:2], gaps(), "the schedule starts again after GPUs were found")
		})
	}
}

// countingLibrary calls attempt at each look for GPUs.
type countingLibrary struct {
	nvmlapi.Library
	attempt func()
}

func (l countingLibrary) DeviceGetCount() (int, nvml.Return) {
	l.attempt()
	return l.Library.DeviceGetCount()
}

// TestPowerReadingsPlaceALoadInsideAGap: a GPU idles at 100 W and a load
// (700 W) starts at 2.6 s, between the counter reads at 2 s and 3 s; a run
// from 2.6 s to 4 s used 700 W x 1.4 s = 980 J. The driver's power
// readings place the gap's energy; without them it would be smeared over
// the gap (836 J).
func TestPowerReadingsPlaceALoadInsideAGap(t *testing.T) {
	sc := fakenvml.Scenario{Driver: "550.54.15", GPUs: []fakenvml.GPU{{
		UUID: "GPU-c0570000-0000-4000-8000-000000000000", Name: "NVIDIA H100 80GB HBM3", BusID: "00000000:18:00.0",
		MemTotal: 80 << 30, EnergyMJ: 1_000_000,
		Power: []fakenvml.PowerStep{{FromUs: 0, MW: 100_000}, {FromUs: 2*sec + 6*sec/10, MW: 700_000}},
	}}}
	s, clk, logs := startFake(t, sc, createDefaultConfig())
	s.tick()
	for k := uint64(1); k <= 5; k++ {
		clk.set(k * sec)
		s.tick()
	}
	at := func(us uint64) time.Time { return time.UnixMicro(int64(us)) }
	w := gpucost.Window{From: at(2*sec + 6*sec/10), To: at(4 * sec)}
	series := s.Samples(w.From, w.To)
	require.Len(t, series, 1)
	require.NotEmpty(t, series[0].Power)
	j, r := gpucost.Energy(series[0].Energy, series[0].Power, w, s.MaxGap())
	require.Equal(t, gpucost.Covered, r)
	near(t, 980, j)
	j, r = gpucost.Energy(series[0].Energy, nil, w, s.MaxGap())
	require.Equal(t, gpucost.Covered, r)
	near(t, 836, j)
	assert.Zero(t, logs.FilterMessageSnippet("does not support").Len())
}

// TestPowerReadingsLostToTheDriversBufferAreLinear: the driver keeps about
// 2.4 s of power readings; samplings 4 s apart lose some, and the gap
// between those counter reads is interpolated linearly, never along a
// curve with a hole.
func TestPowerReadingsLostToTheDriversBufferAreLinear(t *testing.T) {
	sc := fakenvml.Scenario{Driver: "550.54.15", GPUs: []fakenvml.GPU{{
		UUID: "GPU-c0570000-0000-4000-8000-000000000000", Name: "NVIDIA H100 80GB HBM3", BusID: "00000000:18:00.0",
		MemTotal: 80 << 30, EnergyMJ: 1_000_000,
		Power: []fakenvml.PowerStep{{FromUs: 0, MW: 100_000}, {FromUs: 6 * sec, MW: 700_000}},
	}}}
	cfg := createDefaultConfig()
	cfg.SamplingInterval = 4 * time.Second
	s, clk, _ := startFake(t, sc, cfg)
	s.tick()
	for _, us := range []uint64{sec, 5 * sec, 9 * sec} {
		clk.set(us)
		s.tick()
	}
	at := func(us uint64) time.Time { return time.UnixMicro(int64(us)) }
	// 1 s at 100 W and 3 s at 700 W between the reads at 5 s and 9 s:
	// 2,200 J; linearly, the window from 6 s gets 3/4 of it.
	w := gpucost.Window{From: at(6 * sec), To: at(9 * sec)}
	series := s.Samples(w.From, w.To)
	j, r := gpucost.Energy(series[0].Energy, series[0].Power, w, s.MaxGap())
	require.Equal(t, gpucost.Covered, r)
	near(t, 1650, j)
}

// gpmScenario is costScenario with GPM on GPU 0: SM activity 20 % from
// 0 s, 60 % from 2.2 s, 30 % from 3.7 s; tensor activity 5 %, 25 %, 0 %
// at the same times. GPU 1 has none (a GPU before Hopper).
func gpmScenario() fakenvml.Scenario {
	sc := costScenario()
	sc.GPUs[0].GPM = fakenvml.GPMOn
	sc.GPUs[0].GPMSteps = []fakenvml.GPMStep{
		{GPUInstance: -1, FromUs: 0, Values: [4]float64{20, 50, 5, 10}},
		{GPUInstance: -1, FromUs: 2*sec + sec/5, Values: [4]float64{60, 70, 25, 40}},
		{GPUInstance: -1, FromUs: 3*sec + 7*sec/10, Values: [4]float64{30, 45, 0, 20}},
	}
	return sc
}

// TestSamplesGiveGPMActivity samples every half second and checks the mean
// SM and tensor activity of [1.25 s, 4.75 s] against the scenario by hand;
// GPU 1, without GPM, says so once and has no activity samples.
func TestSamplesGiveGPMActivity(t *testing.T) {
	cfg := createDefaultConfig()
	cfg.SamplingInterval = 500 * time.Millisecond
	s, clk, logs := startFake(t, gpmScenario(), cfg)
	s.tick()
	for k := range 9 {
		clk.set(sec + uint64(k)*half)
		s.tick()
	}
	at := func(us uint64) time.Time { return time.UnixMicro(int64(us)) }
	w := gpucost.Window{From: at(sec + sec/4), To: at(4*sec + 3*sec/4)}
	series := s.Samples(w.From, w.To)
	require.Len(t, series, 2)
	g0, g1 := series[0], series[1]
	require.True(t, g0.GPM)
	// SM: 0.95 s at 20 %, 1.5 s at 60 %, 1.05 s at 30 %, over 3.5 s.
	m, r := gpucost.MeanActivity(g0.SMActivity, w, s.MaxGap())
	require.Equal(t, gpucost.Covered, r)
	near(t, (0.95*0.20+1.5*0.60+1.05*0.30)/3.5, m)
	// Tensor: 0.95 s at 5 %, 1.5 s at 25 %, 1.05 s at 0 %.
	m, r = gpucost.MeanActivity(g0.TensorActivity, w, s.MaxGap())
	require.Equal(t, gpucost.Covered, r)
	near(t, (0.95*0.05+1.5*0.25)/3.5, m)
	// The first sampling (at 1 µs) only opens: a window from before it is
	// not covered.
	_, r = gpucost.MeanActivity(g0.SMActivity, gpucost.Window{From: at(0), To: at(sec)}, s.MaxGap())
	assert.Equal(t, gpucost.NotCovered, r)

	assert.False(t, g1.GPM)
	assert.Empty(t, g1.SMActivity)
	assert.Empty(t, g1.TensorActivity)
	assert.Equal(t, 1, logs.FilterMessageSnippet("GPU has no GPM").Len())
}
