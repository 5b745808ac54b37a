// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlreceiver // import "github.com/gpubuild/otelcol-gpubuild/receiver/nvmlreceiver"

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/scraper/scrapererror"

	"github.com/gpubuild/otelcol-gpubuild/receiver/nvmlreceiver/internal/metadata"
)

// migEnabled reports whether the GPU is in MIG mode now. GPUs without MIG
// answer NOT_SUPPORTED, the common case, which is not worth a log line.
func (s *gpuScraper) migEnabled(g *gpuState, errs *scrapererror.ScrapeErrors) bool {
	if !s.sym.Mig {
		return false
	}
	mode, _, ret := g.dev.GetMigMode()
	if isUnsupported(ret) {
		return false
	}
	return s.check(g, featMIGMode, ret, errs) && mode == nvml.DEVICE_MIG_ENABLE
}

// scrapeMIG emits one resource per MIG device of a GPU in MIG mode, with
// its memory and its processes' memory. NVML reports no utilization,
// power, clocks or per-process utilization for MIG devices (those need
// DCGM profiling or GPM); the parent GPU keeps its own resource with the
// metrics NVML still answers in MIG mode. GPM (Hopper and later) is the
// exception: it is sampled per GPU instance through the parent's handle.
func (s *gpuScraper) scrapeMIG(g *gpuState, ts pcommon.Timestamp, errs *scrapererror.ScrapeErrors) {
	wantMem := s.wantMemory()
	wantProcs := s.wantProcesses()
	wantGPM := s.wantGPM()
	if !wantMem && !wantProcs && !wantGPM {
		return
	}
	defer s.dropGoneGPMInstances(g, ts)
	slots, ret := g.dev.GetMaxMigDeviceCount()
	if !s.check(g, featMIGMode, ret, errs) {
		return
	}
	for i := range slots {
		mig, ret := g.dev.GetMigDeviceHandleByIndex(i)
		if ret == nvml.ERROR_NOT_FOUND || ret == nvml.ERROR_INVALID_ARGUMENT {
			continue // empty slot
		}
		if !s.check(g, featMIGMode, ret, errs) {
			if g.lost {
				return
			}
			continue
		}
		gi, ret := mig.GetGpuInstanceId()
		if !s.check(g, featMIGMode, ret, errs) {
			continue
		}
		ci, ret := mig.GetComputeInstanceId()
		if !s.check(g, featMIGMode, ret, errs) {
			continue
		}
		migUUID, ret := mig.GetUUID()
		if !s.check(g, featMIGMode, ret, errs) {
			continue
		}
		if wantMem {
			s.recordMemoryOf(g, mig, featMIGMemory, ts, errs)
		}
		if wantProcs {
			s.recordProcessesOf(g, mig, featMIGProcesses, false, ts, errs)
		}
		if wantGPM && !g.lost {
			s.recordGPMOf(g, gi, ts, errs)
		}
		rb := s.gpuResource(g)
		rb.SetGpuMigUUID(migUUID)
		rb.SetGpuMigGpuInstanceID(int64(gi))
		rb.SetGpuMigComputeInstanceID(int64(ci))
		s.mb.EmitForResource(metadata.WithResource(rb.Emit()))
		if g.lost {
			return
		}
	}
}
