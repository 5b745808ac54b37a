// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlreceiver // import "github.com/gpubuild/otelcol-gpubuild/receiver/nvmlreceiver"

import (
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/scraper/scrapererror"
	"go.uber.org/zap"

	"github.com/gpubuild/otelcol-gpubuild/receiver/nvmlreceiver/internal/metadata"
)

// gpuState is what the scraper keeps per physical GPU between scrapes.
type gpuState struct {
	dev      device
	index    int
	uuid     string
	model    string
	busID    string
	resource pcommon.Resource // built once; copied into every scrape

	// Newest sample timestamps seen (µs), so each scrape averages only the
	// samples taken since the previous one.
	utilTs, memUtilTs, procUtilTs uint64

	throttleMask  uint64 // reasons the GPU can report
	throttleKnown bool

	lost       bool      // ERROR_GPU_IS_LOST seen in this scrape
	gone       bool      // lost and not found again yet
	retryAt    time.Time // next attempt to find a gone GPU
	migEnabled bool      // MIG mode on in this scrape
	reported   uint64    // bit set of features already logged as unsupported
	procUtil   procUtil  // reused per-process utilization accumulator
	gpm        gpmState
}

// feature names one NVML query for "not supported" logging.
type feature uint8

const (
	featUtilSamples feature = iota
	featMemUtilSamples
	featUtilization
	featMemory
	featTemperature
	featPower
	featPowerLimit
	featEnergy
	featClockSM
	featClockMemory
	featClockGraphics
	featECCCorrected
	featECCUncorrected
	featThrottle
	featPCIeTX
	featPCIeRX
	featProcesses
	featProcessUtil
	featMIGMode
	featMIGMemory
	featMIGProcesses
	featGPM
	featGPMMIG
	featCount
)

var featureNames = [featCount]string{
	featUtilSamples:    "hw.gpu.utilization samples (falling back to the instantaneous value)",
	featMemUtilSamples: "gpu.memory.controller.utilization samples (falling back to the instantaneous value)",
	featUtilization:    "hw.gpu.utilization / gpu.memory.controller.utilization",
	featMemory:         "hw.gpu.memory.usage / hw.gpu.memory.limit",
	featTemperature:    "hw.temperature",
	featPower:          "hw.power",
	featPowerLimit:     "gpu.power.limit",
	featEnergy:         "hw.energy",
	featClockSM:        "gpu.clock.frequency sm",
	featClockMemory:    "gpu.clock.frequency memory",
	featClockGraphics:  "gpu.clock.frequency graphics",
	featECCCorrected:   "hw.errors corrected",
	featECCUncorrected: "hw.errors uncorrected",
	featThrottle:       "gpu.clock.throttled",
	featPCIeTX:         "gpu.pcie.throughput transmit",
	featPCIeRX:         "gpu.pcie.throughput receive",
	featProcesses:      "gpu.process.memory.usage",
	featProcessUtil:    "gpu.process.utilization",
	featMIGMode:        "MIG mode",
	featMIGMemory:      "MIG instance memory",
	featMIGProcesses:   "MIG instance processes",
	featGPM:            "GPM (gpu.sm.activity, gpu.sm.occupancy, gpu.tensor.activity, gpu.dram.bandwidth.utilization)",
	featGPMMIG:         "GPM per MIG GPU instance",
}

func (f feature) String() string { return featureNames[f] }

// gpuStep records one group of metrics for a GPU.
type gpuStep func(*gpuScraper, *gpuState, pcommon.Timestamp, *scrapererror.ScrapeErrors)

// gpuSteps run in order; a lost GPU stops the sequence.
var gpuSteps = [...]gpuStep{
	(*gpuScraper).recordUtilization,
	(*gpuScraper).recordGPM,
	(*gpuScraper).recordMemory,
	(*gpuScraper).recordTemperature,
	(*gpuScraper).recordPower,
	(*gpuScraper).recordClocks,
	(*gpuScraper).recordECC,
	(*gpuScraper).recordThrottle,
	(*gpuScraper).recordPCIe,
	(*gpuScraper).recordProcesses,
	(*gpuScraper).recordXID,
}

func (s *gpuScraper) scrapeGPU(g *gpuState, ts pcommon.Timestamp, errs *scrapererror.ScrapeErrors) {
	g.lost = false
	g.migEnabled = s.migEnabled(g, errs)
	for _, step := range gpuSteps {
		if g.lost {
			break
		}
		step(s, g, ts, errs)
	}
	// Emit what was recorded even for a lost GPU: those values were read
	// before it fell off and must not leak into the next GPU's resource.
	s.mb.EmitForResource(metadata.WithResource(g.resource))
	if g.migEnabled && !g.lost {
		s.scrapeMIG(g, ts, errs)
	}
}

func (s *gpuScraper) recordUtilization(g *gpuState, ts pcommon.Timestamp, errs *scrapererror.ScrapeErrors) {
	wantGPU := s.cfg.Metrics.HwGpuUtilization.Enabled
	wantMem := s.cfg.Metrics.GpuMemoryControllerUtilization.Enabled
	if !wantGPU && !wantMem {
		return
	}
	var gpuPct, memPct float64
	var haveGPU, haveMem bool
	if wantGPU && s.sym.Samples {
		gpuPct, haveGPU = s.averageSamples(g, nvml.GPU_UTILIZATION_SAMPLES, &g.utilTs, featUtilSamples, errs)
	}
	if wantMem && s.sym.Samples && !g.lost {
		memPct, haveMem = s.averageSamples(g, nvml.MEMORY_UTILIZATION_SAMPLES, &g.memUtilTs, featMemUtilSamples, errs)
	}
	if ((wantGPU && !haveGPU) || (wantMem && !haveMem)) && !g.lost {
		if !s.sym.UtilRates {
			s.reportUnsupported(g, featUtilization, nvml.ERROR_FUNCTION_NOT_FOUND)
			return
		}
		rates, ret := g.dev.GetUtilizationRates()
		if s.check(g, featUtilization, ret, errs) {
			if !haveGPU {
				gpuPct, haveGPU = float64(rates.Gpu), true
			}
			if !haveMem {
				memPct, haveMem = float64(rates.Memory), true
			}
		}
	}
	if wantGPU && haveGPU {
		s.mb.RecordHwGpuUtilizationDataPoint(ts, gpuPct/100, metadata.AttributeHwGpuTaskGeneral)
	}
	if wantMem && haveMem {
		s.mb.RecordGpuMemoryControllerUtilizationDataPoint(ts, memPct/100)
	}
}

// averageSamples averages NVML's utilization samples (percent) taken after
// *lastTs and advances *lastTs. false means the caller should fall back to
// the instantaneous reading.
func (s *gpuScraper) averageSamples(g *gpuState, kind nvml.SamplingType, lastTs *uint64, f feature, errs *scrapererror.ScrapeErrors) (float64, bool) {
	vt, samples, ret := g.dev.GetSamples(kind, *lastTs)
	switch {
	case ret == nvml.SUCCESS:
		avg, newest, ok := averageSamples(vt, samples, *lastTs)
		*lastTs = newest
		return avg, ok
	case ret == nvml.ERROR_NOT_FOUND:
		// No sample since the last scrape (interval shorter than NVML's
		// sampling period).
	case ret == nvml.ERROR_GPU_IS_LOST:
		s.check(g, f, ret, errs)
	case isUnsupported(ret):
		s.reportUnsupported(g, f, ret)
	default:
		// Any other failure: the instantaneous reading decides whether
		// this is worth a scrape error.
		s.logger.Debug("NVML utilization samples failed", zap.Int("gpu.index", g.index), zap.Error(ret))
	}
	return 0, false
}

func (s *gpuScraper) recordMemory(g *gpuState, ts pcommon.Timestamp, errs *scrapererror.ScrapeErrors) {
	if !s.wantMemory() {
		return
	}
	s.recordMemoryOf(g, g.dev, featMemory, ts, errs)
}

// recordMemoryOf reads the framebuffer of a GPU or MIG device. The v2 call
// splits out the memory the driver reserves; older drivers only have v1.
func (s *gpuScraper) recordMemoryOf(g *gpuState, d device, f feature, ts pcommon.Timestamp, errs *scrapererror.ScrapeErrors) {
	var total, used, reserved uint64
	haveReserved := false
	if !s.entryPoint(g, s.sym.MemoryInfo, f) {
		return
	}
	if s.sym.MemoryInfoV2 {
		m, ret := d.GetMemoryInfo_v2()
		if !s.check(g, f, ret, errs) {
			return
		}
		total, used, reserved, haveReserved = m.Total, m.Used, m.Reserved, true
	} else {
		m, ret := d.GetMemoryInfo()
		if !s.check(g, f, ret, errs) {
			return
		}
		total, used = m.Total, m.Used
	}
	// Free memory is total - used - reserved: not reported.
	m := &s.cfg.Metrics
	if m.HwGpuMemoryUsage.Enabled {
		s.mb.RecordHwGpuMemoryUsageDataPoint(ts, int64(used))
	}
	if m.GpuMemoryReserved.Enabled && haveReserved {
		s.mb.RecordGpuMemoryReservedDataPoint(ts, int64(reserved))
	}
	if m.HwGpuMemoryLimit.Enabled {
		s.mb.RecordHwGpuMemoryLimitDataPoint(ts, int64(total))
	}
	if m.HwGpuMemoryUtilization.Enabled && total > 0 {
		s.mb.RecordHwGpuMemoryUtilizationDataPoint(ts, float64(used)/float64(total))
	}
}

// entryPoint tells whether the NVML entry point of feature f is present
// (found tells); a missing one is reported, once, as unsupported.
func (s *gpuScraper) entryPoint(g *gpuState, found bool, f feature) bool {
	if !found {
		s.reportUnsupported(g, f, nvml.ERROR_FUNCTION_NOT_FOUND)
	}
	return found
}

func (s *gpuScraper) recordTemperature(g *gpuState, ts pcommon.Timestamp, errs *scrapererror.ScrapeErrors) {
	if !s.cfg.Metrics.HwTemperature.Enabled || !s.entryPoint(g, s.sym.Temperature, featTemperature) {
		return
	}
	t, ret := g.dev.GetTemperature(nvml.TEMPERATURE_GPU)
	if s.check(g, featTemperature, ret, errs) {
		s.mb.RecordHwTemperatureDataPoint(ts, int64(t))
	}
}

// recordPower converts NVML's milliwatts and millijoules to W and J.
func (s *gpuScraper) recordPower(g *gpuState, ts pcommon.Timestamp, errs *scrapererror.ScrapeErrors) {
	m := &s.cfg.Metrics
	if m.HwPower.Enabled && !s.sym.Power {
		s.reportUnsupported(g, featPower, nvml.ERROR_FUNCTION_NOT_FOUND)
	} else if m.HwPower.Enabled {
		mw, ret := g.dev.GetPowerUsage()
		if s.check(g, featPower, ret, errs) {
			s.mb.RecordHwPowerDataPoint(ts, float64(mw)/1000)
		}
	}
	if m.GpuPowerLimit.Enabled && !g.lost && !s.sym.PowerLimit {
		s.reportUnsupported(g, featPowerLimit, nvml.ERROR_FUNCTION_NOT_FOUND)
	} else if m.GpuPowerLimit.Enabled && !g.lost {
		mw, ret := g.dev.GetEnforcedPowerLimit()
		if s.check(g, featPowerLimit, ret, errs) {
			s.mb.RecordGpuPowerLimitDataPoint(ts, float64(mw)/1000)
		}
	}
	if m.HwEnergy.Enabled && !g.lost {
		if !s.sym.Energy {
			s.reportUnsupported(g, featEnergy, nvml.ERROR_FUNCTION_NOT_FOUND)
			return
		}
		mj, ret := g.dev.GetTotalEnergyConsumption()
		if s.check(g, featEnergy, ret, errs) {
			s.mb.RecordHwEnergyDataPoint(ts, float64(mj)/1000)
		}
	}
}

var clockDomains = [...]struct {
	clock nvml.ClockType
	attr  metadata.AttributeGpuClockType
	f     feature
}{
	{nvml.CLOCK_SM, metadata.AttributeGpuClockTypeSm, featClockSM},
	{nvml.CLOCK_MEM, metadata.AttributeGpuClockTypeMemory, featClockMemory},
	{nvml.CLOCK_GRAPHICS, metadata.AttributeGpuClockTypeGraphics, featClockGraphics},
}

// recordClocks converts NVML's MHz to Hz.
func (s *gpuScraper) recordClocks(g *gpuState, ts pcommon.Timestamp, errs *scrapererror.ScrapeErrors) {
	if !s.cfg.Metrics.GpuClockFrequency.Enabled || !s.entryPoint(g, s.sym.ClockInfo, featClockSM) {
		return
	}
	for _, c := range clockDomains {
		mhz, ret := g.dev.GetClockInfo(c.clock)
		if s.check(g, c.f, ret, errs) {
			s.mb.RecordGpuClockFrequencyDataPoint(ts, int64(mhz)*1_000_000, c.attr)
		}
		if g.lost {
			return
		}
	}
}

// recordECC reads the volatile counters (since the driver last loaded), so
// a driver reload is a counter reset, as for any cumulative sum.
func (s *gpuScraper) recordECC(g *gpuState, ts pcommon.Timestamp, errs *scrapererror.ScrapeErrors) {
	if !s.cfg.Metrics.HwErrors.Enabled || !s.entryPoint(g, s.sym.Ecc, featECCCorrected) {
		return
	}
	n, ret := g.dev.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.VOLATILE_ECC)
	if s.check(g, featECCCorrected, ret, errs) {
		s.mb.RecordHwErrorsDataPoint(ts, int64(n), metadata.AttributeErrorTypeCorrected)
	}
	if g.lost {
		return
	}
	n, ret = g.dev.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC)
	if s.check(g, featECCUncorrected, ret, errs) {
		s.mb.RecordHwErrorsDataPoint(ts, int64(n), metadata.AttributeErrorTypeUncorrected)
	}
}

// throttleReasons maps NVML's clocks event reason bits to attribute values.
var throttleReasons = [...]struct {
	bit  uint64
	attr metadata.AttributeGpuClockThrottleReason
}{
	{nvml.ClocksEventReasonGpuIdle, metadata.AttributeGpuClockThrottleReasonGpuIdle},
	{nvml.ClocksEventReasonApplicationsClocksSetting, metadata.AttributeGpuClockThrottleReasonApplicationsClocksSetting},
	{nvml.ClocksEventReasonSwPowerCap, metadata.AttributeGpuClockThrottleReasonSwPowerCap},
	{nvml.ClocksThrottleReasonHwSlowdown, metadata.AttributeGpuClockThrottleReasonHwSlowdown},
	{nvml.ClocksEventReasonSyncBoost, metadata.AttributeGpuClockThrottleReasonSyncBoost},
	{nvml.ClocksEventReasonSwThermalSlowdown, metadata.AttributeGpuClockThrottleReasonSwThermalSlowdown},
	{nvml.ClocksThrottleReasonHwThermalSlowdown, metadata.AttributeGpuClockThrottleReasonHwThermalSlowdown},
	{nvml.ClocksThrottleReasonHwPowerBrakeSlowdown, metadata.AttributeGpuClockThrottleReasonHwPowerBrakeSlowdown},
	{nvml.ClocksEventReasonDisplayClockSetting, metadata.AttributeGpuClockThrottleReasonDisplayClockSetting},
}

// recordThrottle emits 1/0 per reason the GPU supports. Drivers before R535
// only have the older "throttle reasons" names of the same bit mask.
func (s *gpuScraper) recordThrottle(g *gpuState, ts pcommon.Timestamp, errs *scrapererror.ScrapeErrors) {
	if !s.cfg.Metrics.GpuClockThrottled.Enabled {
		return
	}
	var supported, current func() (uint64, nvml.Return)
	switch {
	case s.sym.ClocksEventReasons:
		supported, current = g.dev.GetSupportedClocksEventReasons, g.dev.GetCurrentClocksEventReasons
	case s.sym.ClocksThrottle:
		supported, current = g.dev.GetSupportedClocksThrottleReasons, g.dev.GetCurrentClocksThrottleReasons
	default:
		s.reportUnsupported(g, featThrottle, nvml.ERROR_FUNCTION_NOT_FOUND)
		return
	}
	if !g.throttleKnown {
		mask, ret := supported()
		if !s.check(g, featThrottle, ret, errs) {
			return
		}
		g.throttleMask, g.throttleKnown = mask, true
	}
	if g.throttleMask == 0 {
		return
	}
	reasons, ret := current()
	if !s.check(g, featThrottle, ret, errs) {
		return
	}
	for _, r := range throttleReasons {
		if g.throttleMask&r.bit == 0 {
			continue
		}
		var v int64
		if reasons&r.bit != 0 {
			v = 1
		}
		s.mb.RecordGpuClockThrottledDataPoint(ts, v, r.attr)
	}
}

// recordPCIe converts NVML's KiB/s to bytes/s. NVML's TX is GPU to host.
func (s *gpuScraper) recordPCIe(g *gpuState, ts pcommon.Timestamp, errs *scrapererror.ScrapeErrors) {
	if !s.cfg.Metrics.GpuPcieThroughput.Enabled || !s.entryPoint(g, s.sym.Pcie, featPCIeTX) {
		return
	}
	kib, ret := g.dev.GetPcieThroughput(nvml.PCIE_UTIL_TX_BYTES)
	if s.check(g, featPCIeTX, ret, errs) {
		s.mb.RecordGpuPcieThroughputDataPoint(ts, int64(kib)*1024, metadata.AttributeNetworkIoDirectionTransmit)
	}
	if g.lost {
		return
	}
	kib, ret = g.dev.GetPcieThroughput(nvml.PCIE_UTIL_RX_BYTES)
	if s.check(g, featPCIeRX, ret, errs) {
		s.mb.RecordGpuPcieThroughputDataPoint(ts, int64(kib)*1024, metadata.AttributeNetworkIoDirectionReceive)
	}
}

func (s *gpuScraper) recordXID(g *gpuState, ts pcommon.Timestamp, _ *scrapererror.ScrapeErrors) {
	if s.xid == nil {
		return
	}
	s.xidBuf = s.xid.appendCounts(s.xidBuf[:0], g.uuid)
	for _, c := range s.xidBuf {
		s.mb.RecordGpuXidErrorsDataPoint(ts, c.count, int64(c.xid))
	}
}

// wantMemory tells whether any metric needs the framebuffer figures.
func (s *gpuScraper) wantMemory() bool {
	m := &s.cfg.Metrics
	return m.HwGpuMemoryUsage.Enabled || m.HwGpuMemoryLimit.Enabled || m.HwGpuMemoryUtilization.Enabled || m.GpuMemoryReserved.Enabled
}
