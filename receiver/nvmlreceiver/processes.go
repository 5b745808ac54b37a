// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlreceiver // import "github.com/gpubuild/otelcol-gpubuild/receiver/nvmlreceiver"

import (
	"math"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/scraper/scrapererror"
	"go.uber.org/zap"
)

// memoryNotAvailable is NVML_VALUE_NOT_AVAILABLE in usedGpuMemory, e.g.
// when the driver hides other containers' usage.
const memoryNotAvailable = math.MaxUint64

// procUtil accumulates SM utilization samples (percent) per PID.
type procUtil map[uint32]procUtilSum

type procUtilSum struct {
	sum uint64
	n   uint64
}

func (s *gpuScraper) recordProcesses(g *gpuState, ts pcommon.Timestamp, errs *scrapererror.ScrapeErrors) {
	// In MIG mode processes are reported per MIG device only, so that no
	// process is counted twice.
	if !s.wantProcesses() || g.migEnabled {
		return
	}
	s.recordProcessesOf(g, g.dev, featProcesses, true, ts, errs)
}

func (s *gpuScraper) wantProcesses() bool {
	return s.cfg.PerProcess &&
		(s.cfg.Metrics.GpuProcessMemoryUsage.Enabled || s.cfg.Metrics.GpuProcessUtilization.Enabled)
}

// recordProcessesOf records the compute processes of a GPU or MIG device.
// NVML has no per-process utilization on MIG devices, so withUtil is false
// for them.
func (s *gpuScraper) recordProcessesOf(g *gpuState, d device, f feature, withUtil bool, ts pcommon.Timestamp, errs *scrapererror.ScrapeErrors) {
	if !s.sym.Processes {
		s.reportUnsupported(g, f, nvml.ERROR_FUNCTION_NOT_FOUND)
		return
	}
	procs, ret := d.GetComputeRunningProcesses()
	if !s.check(g, f, ret, errs) || len(procs) == 0 {
		return
	}
	haveUtil := withUtil && s.cfg.Metrics.GpuProcessUtilization.Enabled && s.collectProcessUtil(g, errs)
	wantMem := s.cfg.Metrics.GpuProcessMemoryUsage.Enabled
	for i, p := range procs {
		if seenBefore(procs[:i], p.Pid) {
			continue
		}
		info, ok := s.procs.lookup(p.Pid)
		if !ok {
			s.reportProcessMissing(p.Pid)
			continue
		}
		pid := int64(p.Pid)
		if wantMem && p.UsedGpuMemory != memoryNotAvailable {
			s.mb.RecordGpuProcessMemoryUsageDataPoint(ts, int64(p.UsedGpuMemory), pid, info.executable, info.containerID)
		}
		if haveUtil {
			// A running process without samples did not use the SMs
			// during the interval.
			var ratio float64
			if u := g.procUtil[p.Pid]; u.n > 0 {
				ratio = float64(u.sum) / float64(u.n) / 100
			}
			s.mb.RecordGpuProcessUtilizationDataPoint(ts, ratio, pid, info.executable, info.containerID)
		}
	}
}

func seenBefore(procs []nvml.ProcessInfo, pid uint32) bool {
	for i := range procs {
		if procs[i].Pid == pid {
			return true
		}
	}
	return false
}

// collectProcessUtil fills g.procUtil with the samples taken since the
// previous scrape. false means no per-process utilization for this GPU.
func (s *gpuScraper) collectProcessUtil(g *gpuState, errs *scrapererror.ScrapeErrors) bool {
	if !s.sym.ProcessUtil {
		s.reportUnsupported(g, featProcessUtil, nvml.ERROR_FUNCTION_NOT_FOUND)
		return false
	}
	if g.procUtil == nil {
		g.procUtil = make(procUtil)
	}
	clear(g.procUtil)
	samples, ret := g.dev.GetProcessUtilization(g.procUtilTs)
	switch {
	case ret == nvml.ERROR_NOT_FOUND:
		return true // no process ran kernels since the last scrape
	case !s.check(g, featProcessUtil, ret, errs):
		return false
	}
	newest := g.procUtilTs
	for _, smp := range samples {
		if smp.TimeStamp <= g.procUtilTs {
			continue
		}
		u := g.procUtil[smp.Pid]
		u.sum += uint64(smp.SmUtil)
		u.n++
		g.procUtil[smp.Pid] = u
		newest = max(newest, smp.TimeStamp)
	}
	g.procUtilTs = newest
	return true
}

func (s *gpuScraper) reportProcessMissing(pid uint32) {
	if s.procMissingLogged {
		return
	}
	s.procMissingLogged = true
	s.logger.Info("a GPU process is not visible under /proc and is skipped; this is normal when it just exited, "+
		"otherwise run the collector in the host PID namespace (hostPID: true / --pid=host)",
		zap.Uint32("process.pid", pid))
}
