// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlreceiver // import "github.com/gpubuild/otelcol-gpubuild/receiver/nvmlreceiver"

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/scraper/scrapererror"
	"go.uber.org/zap"

	"github.com/gpubuild/otelcol-gpubuild/internal/nvmlapi"
)

// gpmState is a GPU's GPM (GPU Performance Monitoring, Hopper and later)
// samples: each scrape takes one and reports the metrics of the interval
// since the previous scrape's.
type gpmState struct {
	checked bool // nvmlGpmQueryDeviceSupport answered
	off     bool // no GPM on this GPU (not supported, or the query failed so)
	migOff  bool // no GPM per MIG GPU instance on this GPU
	probing bool // support unknown until the first sample succeeds
	dev     nvmlapi.GPMPair
	mig     map[int]*gpmInstance // by MIG GPU instance id
}

// gpmInstance is one MIG GPU instance's GPM samples. Compute instances of
// one GPU instance share its figures: it is sampled once per scrape.
type gpmInstance struct {
	pair   nvmlapi.GPMPair
	at     pcommon.Timestamp // the scrape that last sampled it
	values nvmlapi.GPMValues
	ok     bool
}

// wantGPM tells whether any GPM metric is enabled.
func (s *gpuScraper) wantGPM() bool {
	m := &s.cfg.Metrics
	return m.GpuSmActivity.Enabled || m.GpuSmOccupancy.Enabled || m.GpuTensorActivity.Enabled || m.GpuDramBandwidthUtilization.Enabled
}

// gpmSupported asks the GPU once whether it has GPM. A GPU without it (before
// Hopper, or a driver that answers NOT_SUPPORTED) is logged once and never
// asked again.
func (s *gpuScraper) gpmSupported(g *gpuState, errs *scrapererror.ScrapeErrors) bool {
	if !s.sym.GPM || g.gpm.off {
		return false
	}
	if g.gpm.checked {
		return true
	}
	switch sup, ret := nvmlapi.QueryGPM(g.dev, s.gpmLock); sup {
	case nvmlapi.GPMUnknown:
		g.gpm.probing = true
	case nvmlapi.GPMNotSupported:
		g.gpm.off = true
		s.reportNoGPM(g, featGPM, ret)
		return false
	case nvmlapi.GPMQueryFailed:
		s.check(g, featGPM, ret, errs)
		return false // asked again next scrape
	}
	// Supported, or unknown: the first sample's answer decides.
	g.gpm.checked = true
	return true
}

// recordGPM samples the GPU's GPM counters and reports the interval since
// the previous scrape (nothing on the first).
func (s *gpuScraper) recordGPM(g *gpuState, ts pcommon.Timestamp, errs *scrapererror.ScrapeErrors) {
	if !s.wantGPM() || !s.gpmSupported(g, errs) {
		return
	}
	v, ok, ret := g.gpm.dev.Take(s.lib, s.gpmLock, g.dev.GpmSampleGet)
	if g.gpm.probing && ret != nvml.SUCCESS && ret != nvml.ERROR_GPU_IS_LOST {
		// Support unknown and the first sample fails: no GPM here, said
		// once, rather than a scrape error on every scrape of an older GPU.
		g.gpm.off = true
		s.reportNoGPM(g, featGPM, ret)
		s.freeGPM(g)
		return
	}
	g.gpm.probing = g.gpm.probing && ret != nvml.SUCCESS
	if !s.gpmCheck(g, featGPM, ret, &g.gpm.off, errs) {
		if g.gpm.off {
			s.freeGPM(g)
		}
		return
	}
	if ok {
		s.recordGPMValues(ts, v)
	}
}

// recordGPMOf reports the GPM metrics of MIG GPU instance gi into the
// MIG device's resource being built.
func (s *gpuScraper) recordGPMOf(g *gpuState, gi int, ts pcommon.Timestamp, errs *scrapererror.ScrapeErrors) {
	if !s.wantGPM() || !s.sym.GPMMig || g.gpm.migOff || !s.gpmSupported(g, errs) {
		return
	}
	if g.gpm.mig == nil {
		g.gpm.mig = map[int]*gpmInstance{}
	}
	inst := g.gpm.mig[gi]
	if inst == nil {
		inst = &gpmInstance{}
		g.gpm.mig[gi] = inst
	}
	if inst.at != ts {
		inst.at = ts
		v, ok, ret := inst.pair.Take(s.lib, s.gpmLock, func(smp nvml.GpmSample) nvml.Return { return g.dev.GpmMigSampleGet(gi, smp) })
		inst.values, inst.ok = v, ok
		if !s.gpmCheck(g, featGPMMIG, ret, &g.gpm.migOff, errs) {
			inst.ok = false
			if g.gpm.migOff {
				inst.pair.Free(s.lib, s.gpmLock)
			}
			return
		}
	}
	if inst.ok {
		s.recordGPMValues(ts, inst.values)
	}
}

// dropGoneGPMInstances frees the samples of GPU instances this scrape did not
// see (MIG reconfigured).
func (s *gpuScraper) dropGoneGPMInstances(g *gpuState, ts pcommon.Timestamp) {
	for gi, inst := range g.gpm.mig {
		if inst.at != ts {
			inst.pair.Free(s.lib, s.gpmLock)
			delete(g.gpm.mig, gi)
		}
	}
}

// gpmCheck sorts a GPM answer: an unsupported one turns GPM off (*off) with
// one log line for the GPU.
func (s *gpuScraper) gpmCheck(g *gpuState, f feature, ret nvml.Return, off *bool, errs *scrapererror.ScrapeErrors) bool {
	if isUnsupported(ret) {
		*off = true
		s.reportNoGPM(g, f, ret)
		return false
	}
	return s.check(g, f, ret, errs)
}

// reportNoGPM logs, once per GPU and feature, that GPM is off for the GPU.
// Its own message: most GPUs in service (before Hopper) have no GPM, which
// is not a metric they lack among others.
func (s *gpuScraper) reportNoGPM(g *gpuState, f feature, ret nvml.Return) {
	if g.reported&(1<<f) != 0 {
		return
	}
	g.reported |= 1 << f
	s.logger.Info("GPU has no GPM profiling metrics (Hopper and later); not reporting them for this GPU",
		zap.String("what", f.String()), zap.Int("gpu.index", g.index), zap.String("gpu.uuid", g.uuid), zap.Error(ret))
}

func (s *gpuScraper) recordGPMValues(ts pcommon.Timestamp, v nvmlapi.GPMValues) {
	m := &s.cfg.Metrics
	if m.GpuSmActivity.Enabled && v.OK[nvmlapi.GPMSMActivity] {
		s.mb.RecordGpuSmActivityDataPoint(ts, v.Percent[nvmlapi.GPMSMActivity]/100)
	}
	if m.GpuSmOccupancy.Enabled && v.OK[nvmlapi.GPMSMOccupancy] {
		s.mb.RecordGpuSmOccupancyDataPoint(ts, v.Percent[nvmlapi.GPMSMOccupancy]/100)
	}
	if m.GpuTensorActivity.Enabled && v.OK[nvmlapi.GPMTensorActivity] {
		s.mb.RecordGpuTensorActivityDataPoint(ts, v.Percent[nvmlapi.GPMTensorActivity]/100)
	}
	if m.GpuDramBandwidthUtilization.Enabled && v.OK[nvmlapi.GPMDRAMBandwidth] {
		s.mb.RecordGpuDramBandwidthUtilizationDataPoint(ts, v.Percent[nvmlapi.GPMDRAMBandwidth]/100)
	}
}

// resetGPM drops the previous samples of a GPU found again after it was
// lost: no interval spans the loss.
func (g *gpuState) resetGPM() {
	g.gpm.dev.Reset()
	for _, inst := range g.gpm.mig {
		inst.pair.Reset()
	}
}

// freeGPM releases a GPU's GPM sample buffers.
func (s *gpuScraper) freeGPM(g *gpuState) {
	g.gpm.dev.Free(s.lib, s.gpmLock)
	for gi, inst := range g.gpm.mig {
		inst.pair.Free(s.lib, s.gpmLock)
		delete(g.gpm.mig, gi)
	}
}
