// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlsamplerextension // import "github.com/gpubuild/otelcol-gpubuild/extension/nvmlsamplerextension"

import (
	"context"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.opentelemetry.io/collector/component"
	"go.uber.org/zap"

	"github.com/gpubuild/otelcol-gpubuild/internal/gpucost"
	"github.com/gpubuild/otelcol-gpubuild/internal/nvmlapi"
)

// driverSamplesPerSecond bounds how many utilization samples the driver
// keeps per second (about six on recent GPUs), to size the ring.
const driverSamplesPerSecond = 8

// sampler owns the NVML session. One mutex serializes the sampling loop,
// the sampling on demand and the readers; one sampling of a GPU is a few
// NVML calls.
type sampler struct {
	cfg    *Config
	logger *zap.Logger
	load   nvmlapi.LoadFunc
	now    func() time.Time

	mu          sync.Mutex
	lib         nvmlapi.Library // nil until nvmlInit returned SUCCESS
	gpmLock     nvmlapi.GPMLock // lent with lib: the receiver's GPM calls take it too
	sym         nvmlapi.Symbols
	gpus        []*gpuRing
	nextInit    time.Time
	initBackoff nvmlapi.InitBackoff
	loadWarned  bool
	noGPUWarned bool
	lastSample  time.Time

	stop chan struct{}
	done chan struct{}
}

// gpuRing is one GPU's handle and samples.
type gpuRing struct {
	index int
	uuid  string
	dev   nvmlapi.Device

	energy *ring[gpucost.EnergySample]
	util   *ring[gpucost.UtilSample]
	mem    *ring[gpucost.MemSample]
	power  *powerCurve

	// GPM (Hopper and later): the previous sample, and the activity of
	// each period since.
	gpm       nvmlapi.GPMPair
	gpmKnown  bool // GPM support asked (or left to the first sample)
	gpmProbe  bool // support unknown until the first sample succeeds
	gpmOff    bool
	smAct     *ring[gpucost.UtilSample]
	tensorAct *ring[gpucost.UtilSample]

	lastUtilTs   uint64 // newest driver sample taken, NVML's lastSeenTimeStamp
	noDriverUtil bool   // the driver keeps no samples: the instantaneous reading instead
	energyOff    bool
	utilOff      bool
	processesOff bool
	lost         bool
	retryAt      time.Time
}

func newSampler(cfg *Config, logger *zap.Logger) *sampler {
	return newSamplerWith(cfg, logger, nvmlapi.NewSystemLoader(), time.Now)
}

// newSamplerWith takes the NVML loader and the clock, for tests.
func newSamplerWith(cfg *Config, logger *zap.Logger, load nvmlapi.LoadFunc, now func() time.Time) *sampler {
	return &sampler{cfg: cfg, logger: logger, load: load, now: now,
		initBackoff: nvmlapi.InitBackoff{Initial: cfg.InitRetryInterval, Max: cfg.InitRetryMaxInterval}}
}

func (s *sampler) Start(context.Context, component.Host) error {
	s.mu.Lock()
	s.initNVML() // a missing library or GPU is not a start error
	s.mu.Unlock()
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	go s.loop()
	return nil
}

func (s *sampler) Shutdown(context.Context) error {
	if s.stop != nil {
		close(s.stop)
		<-s.done
		s.stop = nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lib != nil {
		for _, g := range s.gpus {
			g.gpm.Free(s.lib, &s.gpmLock)
		}
		if ret := s.lib.Shutdown(); ret != nvml.SUCCESS {
			s.logger.Debug("NVML shutdown failed", zap.Error(ret))
		}
		s.lib = nil
	}
	s.gpus = nil
	return nil
}

func (s *sampler) loop() {
	defer close(s.done)
	t := time.NewTicker(s.cfg.SamplingInterval)
	defer t.Stop()
	period := s.cfg.SamplingInterval
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.tick()
			// Without a GPU the loop sleeps until the next attempt to load
			// NVML instead of waking every sampling interval for nothing.
			if p := s.nextWake(); p != period {
				period = p
				t.Reset(p)
			}
		}
	}
}

// tick samples every GPU, or tries again to load NVML when it has none.
func (s *sampler) tick() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.gpus) == 0 {
		if s.now().Before(s.nextInit) {
			return
		}
		s.initNVML()
	}
	s.sampleAll()
}

// nextWake is how long the loop waits for the next tick: the sampling
// interval while there are GPUs, else until the next attempt to load NVML.
func (s *sampler) nextWake() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.gpus) > 0 {
		return s.cfg.SamplingInterval
	}
	return max(s.nextInit.Sub(s.now()), s.cfg.SamplingInterval)
}

func (s *sampler) MaxGap() time.Duration { return s.cfg.maxGap() }

// NVMLSession lends the extension's NVML session (the nvml receiver's
// nvml_session) and the lock its GPM calls share: false until NVML is
// loaded. The borrower must not shut it down; the extension does, after the
// pipelines.
func (s *sampler) NVMLSession() (nvmlapi.Library, *nvmlapi.GPMLock, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lib, &s.gpmLock, s.lib != nil
}

func (s *sampler) Samples(from, to time.Time) []gpucost.Series {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.gpus) == 0 {
		return nil
	}
	if s.lastSample.Before(to) && !s.now().Before(to) {
		s.sampleAll()
	}
	out := make([]gpucost.Series, 0, len(s.gpus))
	for _, g := range s.gpus {
		energy := g.energy.span(from, to)
		out = append(out, gpucost.Series{
			Index: g.index, UUID: g.uuid,
			Energy: energy,
			Util:   g.util.span(from, to),
			Memory: g.mem.span(from, to),
			Power:  g.power.span(energy),

			GPM:            !g.gpmOff,
			SMActivity:     g.smAct.span(from, to),
			TensorActivity: g.tensorAct.span(from, to),
		})
	}
	return out
}

// initNVML loads NVML if needed and lists the GPUs; on failure it sets the
// next attempt init_retry_interval later, doubling after each further
// failure up to init_retry_max_interval.
func (s *sampler) initNVML() {
	s.nextInit = s.now().Add(s.initBackoff.Failed()) // unless GPUs are found below
	if s.lib == nil {
		lib, err := s.load()
		if err != nil {
			if !s.loadWarned {
				s.logger.Warn("NVML is not available: no GPU samples, so no GPU cost per build, until it loads; retrying with back-off",
					zap.Error(err), zap.Duration("init_retry_interval", s.cfg.InitRetryInterval),
					zap.Duration("init_retry_max_interval", s.cfg.InitRetryMaxInterval))
				s.loadWarned = true
			}
			return
		}
		sym := nvmlapi.LookupSymbols(lib)
		if !sym.Core {
			s.logger.Error("the NVML library lacks entry points every sampling needs; no GPU samples (retrying periodically)",
				zap.Strings("missing", sym.Missing))
			if lib.Extensions().LookupSymbol("nvmlShutdown") == nil {
				_ = lib.Shutdown()
			}
			return
		}
		s.lib, s.sym = lib, sym
		if !sym.Energy || !sym.Processes || (!sym.Samples && !sym.UtilRates) {
			s.logger.Warn("the NVML library lacks some entry points the GPU cost per build needs; the figures that need them are not reported",
				zap.Strings("missing", sym.Missing))
		}
	}
	count, ret := s.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		s.logger.Warn("NVML cannot count GPUs", zap.Error(ret))
		return
	}
	ticks := s.cfg.ticks()
	utilCap := ticks + int(s.cfg.Retention.Seconds()*driverSamplesPerSecond)
	gpus := make([]*gpuRing, 0, count)
	for i := range count {
		h, ret := s.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			s.logger.Warn("NVML cannot open GPU", zap.Int("gpu.index", i), zap.Error(ret))
			continue
		}
		uuid, ret := h.GetUUID()
		if ret != nvml.SUCCESS {
			s.logger.Warn("NVML cannot read GPU UUID", zap.Int("gpu.index", i), zap.Error(ret))
			continue
		}
		gpus = append(gpus, &gpuRing{
			index: i, uuid: uuid, dev: h,
			energy:       newRing(ticks, func(e *gpucost.EnergySample) time.Time { return e.T }),
			util:         newRing(utilCap, func(u *gpucost.UtilSample) time.Time { return u.T }),
			mem:          newRing(ticks, func(m *gpucost.MemSample) time.Time { return m.T }),
			power:        newPowerCurve(s.cfg, !s.sym.Samples),
			energyOff:    !s.sym.Energy,
			noDriverUtil: !s.sym.Samples,
			utilOff:      !s.sym.Samples && !s.sym.UtilRates,
			processesOff: !s.sym.Processes,
			smAct:        newRing(ticks, func(u *gpucost.UtilSample) time.Time { return u.T }),
			tensorAct:    newRing(ticks, func(u *gpucost.UtilSample) time.Time { return u.T }),
			gpmOff:       !s.sym.GPM,
		})
	}
	if len(gpus) == 0 {
		if !s.noGPUWarned {
			s.logger.Warn("NVML loaded but found no GPU; looking again periodically", zap.Int("gpu_count", count))
			s.noGPUWarned = true
		}
		return
	}
	s.gpus = gpus
	s.initBackoff.Reset()
	s.logger.Info("sampling GPUs", zap.Int("count", len(gpus)), zap.Duration("sampling_interval", s.cfg.SamplingInterval),
		zap.Duration("retention", s.cfg.Retention))
}

func (s *sampler) sampleAll() {
	for _, g := range s.gpus {
		if g.lost && !s.reacquire(g) {
			continue
		}
		s.sampleGPU(g)
	}
	s.lastSample = s.now()
}

// sampleGPU takes one sample of each kind. The energy reading is stamped
// halfway through its call, the best estimate of when the driver read it.
func (s *sampler) sampleGPU(g *gpuRing) {
	if !g.energyOff {
		t0 := s.now()
		mj, ret := g.dev.GetTotalEnergyConsumption()
		t1 := s.now()
		// A read whose call took longer than maxReadSpan (the sampler was
		// descheduled inside it) is known only to half the call: it is
		// not kept, and the counter loses nothing until the next read.
		if s.ok(g, "energy", ret, &g.energyOff) && t1.Sub(t0) <= maxReadSpan {
			g.energy.push(gpucost.EnergySample{T: t0.Add(t1.Sub(t0) / 2), MilliJoules: float64(mj)})
		}
		if !g.lost && !g.energyOff && !g.power.off {
			s.samplePower(g)
		}
	}
	if !g.lost && !g.utilOff {
		s.sampleUtil(g)
	}
	if !g.lost && !g.gpmOff {
		s.sampleGPM(g)
	}
	if !g.lost && !g.processesOff {
		t := s.now()
		procs, ret := g.dev.GetComputeRunningProcesses()
		if s.ok(g, "processes", ret, &g.processesOff) {
			list := make([]gpucost.ProcMem, 0, len(procs))
			for _, p := range procs {
				list = append(list, gpucost.ProcMem{PID: p.Pid, Bytes: p.UsedGpuMemory})
			}
			g.mem.push(gpucost.MemSample{T: t, Procs: list})
		}
	}
}

func (s *sampler) sampleUtil(g *gpuRing) {
	if !g.noDriverUtil {
		vt, samples, ret := g.dev.GetSamples(nvml.GPU_UTILIZATION_SAMPLES, g.lastUtilTs)
		switch {
		case ret == nvml.SUCCESS:
			slices.SortFunc(samples, func(a, b nvml.Sample) int { return compareUint64(a.TimeStamp, b.TimeStamp) })
			for i := range samples {
				if samples[i].TimeStamp <= g.lastUtilTs {
					continue
				}
				if v, ok := nvmlapi.SampleValue(vt, samples[i].SampleValue); ok {
					g.util.push(gpucost.UtilSample{T: time.UnixMicro(int64(samples[i].TimeStamp)), Percent: v})
					g.lastUtilTs = samples[i].TimeStamp
				}
			}
			return
		case ret == nvml.ERROR_NOT_FOUND:
			return // no sample since the last sampling
		case nvmlapi.IsUnsupported(ret):
			g.noDriverUtil = true
			s.logger.Info("GPU keeps no utilization samples; using the instantaneous utilization at each sampling",
				zap.Int("gpu.index", g.index), zap.Error(ret))
		default:
			var off bool
			s.ok(g, "utilization samples", ret, &off)
			return
		}
	}
	t := s.now()
	u, ret := g.dev.GetUtilizationRates()
	if s.ok(g, "utilization", ret, &g.utilOff) {
		g.util.push(gpucost.UtilSample{T: t, Percent: float64(u.Gpu)})
	}
}

// ok sorts an NVML answer: true means use the value; an unsupported
// feature is turned off for the GPU with one log line; a lost GPU is
// skipped until it is found again.
func (s *sampler) ok(g *gpuRing, what string, ret nvml.Return, off *bool) bool {
	switch {
	case ret == nvml.SUCCESS:
		return true
	case nvmlapi.IsUnsupported(ret):
		*off = true
		s.logger.Info("GPU does not support a sample; its figures are not reported for this GPU",
			zap.String("what", what), zap.Int("gpu.index", g.index), zap.Error(ret))
	case ret == nvml.ERROR_GPU_IS_LOST:
		if !g.lost {
			g.lost = true
			g.retryAt = s.now().Add(s.cfg.InitRetryInterval)
			s.logger.Warn("GPU is lost; no samples for it until NVML finds it again (runs across the gap get no GPU figures)",
				zap.Int("gpu.index", g.index), zap.String("gpu.uuid", g.uuid))
		}
	default:
		s.logger.Debug("NVML sampling failed", zap.String("what", what), zap.Int("gpu.index", g.index), zap.Error(ret))
	}
	return false
}

// reacquire looks a lost GPU up again by index, accepting it only with the
// same UUID, once per init_retry_interval.
func (s *sampler) reacquire(g *gpuRing) bool {
	if s.now().Before(g.retryAt) {
		return false
	}
	g.retryAt = s.now().Add(s.cfg.InitRetryInterval)
	h, ret := s.lib.DeviceGetHandleByIndex(g.index)
	if ret != nvml.SUCCESS {
		return false
	}
	if uuid, ret := h.GetUUID(); ret != nvml.SUCCESS || uuid != g.uuid {
		return false
	}
	g.dev, g.lost = h, false
	g.gpm.Reset() // the next GPM sample opens a new period
	s.logger.Info("lost GPU is back", zap.Int("gpu.index", g.index), zap.String("gpu.uuid", g.uuid))
	return true
}

// sampleGPM takes a GPM sample, stamped like the energy reading, and
// keeps the SM and tensor activity of the period since the previous one.
// A GPU without GPM is said once and not asked again.
func (s *sampler) sampleGPM(g *gpuRing) {
	if !g.gpmKnown {
		sup, ret := nvmlapi.QueryGPM(g.dev, &s.gpmLock)
		switch sup {
		case nvmlapi.GPMNotSupported:
			s.noGPM(g, ret)
			return
		case nvmlapi.GPMQueryFailed:
			var off bool
			s.ok(g, "GPM support", ret, &off)
			return
		case nvmlapi.GPMUnknown:
			g.gpmProbe = true
		}
		g.gpmKnown = true // supported, or the first sample decides
	}
	t0 := s.now()
	v, _, ret := g.gpm.Take(s.lib, &s.gpmLock, g.dev.GpmSampleGet)
	t := t0.Add(s.now().Sub(t0) / 2)
	if nvmlapi.IsUnsupported(ret) || (g.gpmProbe && ret != nvml.SUCCESS && ret != nvml.ERROR_GPU_IS_LOST) {
		s.noGPM(g, ret)
		return
	}
	g.gpmProbe = g.gpmProbe && ret != nvml.SUCCESS
	var off bool
	if !s.ok(g, "GPM", ret, &off) {
		return
	}
	// The first sample (or the first after a break) has no metrics: its
	// NaN opens a period.
	g.smAct.push(gpucost.UtilSample{T: t, Percent: orNaN(v, nvmlapi.GPMSMActivity)})
	g.tensorAct.push(gpucost.UtilSample{T: t, Percent: orNaN(v, nvmlapi.GPMTensorActivity)})
}

// noGPM turns GPM off for the GPU, with one log line.
func (s *sampler) noGPM(g *gpuRing, ret nvml.Return) {
	g.gpmOff = true
	g.gpm.Free(s.lib, &s.gpmLock)
	s.logger.Info("GPU has no GPM profiling metrics (Hopper and later); no SM or tensor activity per build on it",
		zap.Int("gpu.index", g.index), zap.String("gpu.uuid", g.uuid), zap.Error(ret))
}

// orNaN is metric i of v, or NaN (no figure for the period) when NVML gave
// none.
func orNaN(v nvmlapi.GPMValues, i int) float64 {
	if !v.OK[i] {
		return math.NaN()
	}
	return v.Percent[i]
}

func compareUint64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
