// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlapi // import "github.com/gpubuild/otelcol-gpubuild/internal/nvmlapi"

import (
	"sync"
	"unsafe"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// GPM metrics the components read, in the order of GPMValues.
const (
	GPMSMActivity = iota
	GPMSMOccupancy
	GPMTensorActivity
	GPMDRAMBandwidth
	NumGPMMetrics
)

var gpmMetricIDs = [NumGPMMetrics]nvml.GpmMetricId{
	GPMSMActivity:     nvml.GPM_METRIC_SM_UTIL,
	GPMSMOccupancy:    nvml.GPM_METRIC_SM_OCCUPANCY,
	GPMTensorActivity: nvml.GPM_METRIC_ANY_TENSOR_UTIL,
	GPMDRAMBandwidth:  nvml.GPM_METRIC_DRAM_BW_UTIL,
}

// GPMSupport is what a GPU says about GPM.
type GPMSupport int

const (
	// GPMSupported means the GPU said it has GPM.
	GPMSupported GPMSupport = iota
	// GPMNotSupported means the GPU has none (before Hopper), or NVML said
	// NOT_SUPPORTED.
	GPMNotSupported
	// GPMUnknown means the query itself failed with a version mismatch, which
	// go-nvml v0.13.0-1 always gets from a real driver (it sends a
	// struct-versioned nvmlGpmSupport_t version where NVML wants the raw
	// 1): the first GpmSampleGet decides (NOT_SUPPORTED there: no GPM).
	GPMUnknown
	// GPMQueryFailed means any other error; ask again later.
	GPMQueryFailed
)

// GPMLock serializes the GPM calls made through one NVML session. NVML's
// GPM calls are not safe to make from several threads at once: the nvml
// receiver and the nvml_sampler sampling one GPU's GPM concurrently through
// a shared session crashed the sidecar on an H200 (other GPM users
// serialize them too). Whoever loads NVML owns the session's lock and lends
// it with the session.
type GPMLock struct{ mu sync.Mutex }

// QueryGPM asks dev whether it has GPM; ret is NVML's answer.
func QueryGPM(dev Device, lock *GPMLock) (GPMSupport, nvml.Return) {
	lock.mu.Lock()
	sup, ret := dev.GpmQueryDeviceSupport()
	lock.mu.Unlock()
	switch {
	case ret == nvml.SUCCESS && sup.IsSupportedDevice != 0:
		return GPMSupported, ret
	case ret == nvml.SUCCESS:
		return GPMNotSupported, nvml.ERROR_NOT_SUPPORTED
	case IsUnsupported(ret):
		return GPMNotSupported, ret
	case ret == nvml.ERROR_ARGUMENT_VERSION_MISMATCH:
		return GPMUnknown, ret
	}
	return GPMQueryFailed, ret
}

// GPMValues are the GPM metrics of the interval between two samples, in
// percent (0-100) as NVML reports them; OK[i] is false where NVML gave no
// value for metric i.
type GPMValues struct {
	Percent [NumGPMMetrics]float64
	OK      [NumGPMMetrics]bool
}

// GPMPair keeps the previous GPM sample of one GPU or MIG GPU instance and
// a buffer for the next, so that each sampling gives the metrics of the
// interval since the previous one. Not safe for concurrent use.
type GPMPair struct {
	prev, cur nvml.GpmSample
	havePrev  bool
	mg        nvml.GpmMetricsGetType // 330 KB with go-nvml v0.13.0-1: kept, not on the stack each time
}

// cMetric is nvmlGpmMetric_t as C lays it out (40 bytes on 64-bit).
type cMetric struct {
	metricID   uint32
	nvmlReturn uint32
	value      float64
	_          [3]uintptr // metricInfo: shortName, longName, unit (C strings, or NULL)
}

// cMetrics views mg's metrics array in C's layout. go-nvml v0.13.0-1's
// GpmMetric is not C's nvmlGpmMetric_t: cgo resolved the anonymous
// metricInfo struct to another one, making it 1624 bytes instead of 40, so
// mg.Metrics[i] for i > 0 is not where the library reads and writes
// metric i. go-nvml copies the array's bytes to and from the C call
// unchanged, so reading and writing them in C's layout is right, whatever
// size go-nvml gives GpmMetric (TestGpmMetricLayout checks it is at least
// C's and holds no Go pointers that C's values would overwrite).
func cMetrics(mg *nvml.GpmMetricsGetType) *[NumGPMMetrics]cMetric {
	return (*[NumGPMMetrics]cMetric)(unsafe.Pointer(&mg.Metrics[0]))
}

// Take reads a new sample with get (a GPU's GpmSampleGet, or its parent's
// GpmMigSampleGet for a GPU instance) and, when a previous sample exists,
// returns the metrics between the two: ok is false on the first sampling.
// ret is the first NVML failure; the previous
// sample is then kept, so the next interval spans the failed sampling
// (GPM counters accumulate: that interval's figures are still exact).
func (p *GPMPair) Take(lib Library, lock *GPMLock, get func(nvml.GpmSample) nvml.Return) (v GPMValues, ok bool, ret nvml.Return) {
	lock.mu.Lock()
	defer lock.mu.Unlock()
	for _, buf := range []*nvml.GpmSample{&p.prev, &p.cur} {
		if *buf == nil {
			s, ret := lib.GpmSampleAlloc()
			if ret != nvml.SUCCESS {
				return v, false, ret
			}
			*buf = s
		}
	}
	if ret := get(p.cur); ret != nvml.SUCCESS {
		return v, false, ret
	}
	if p.havePrev {
		mg := &p.mg
		*mg = nvml.GpmMetricsGetType{NumMetrics: NumGPMMetrics, Sample1: p.prev, Sample2: p.cur}
		metrics := cMetrics(mg)
		for i, id := range gpmMetricIDs {
			metrics[i].metricID = uint32(id)
		}
		if ret := lib.GpmMetricsGet(mg); ret != nvml.SUCCESS {
			return v, false, ret // prev kept, as for a failed sample
		}
		for i := range NumGPMMetrics {
			if nvml.Return(metrics[i].nvmlReturn) == nvml.SUCCESS {
				v.Percent[i], v.OK[i] = metrics[i].value, true
				ok = true
			}
		}
	}
	p.prev, p.cur = p.cur, p.prev
	p.havePrev = true
	return v, ok, nvml.SUCCESS
}

// Reset drops the previous sample (a GPU lost and found again: its
// counters may have restarted).
func (p *GPMPair) Reset() { p.havePrev = false }

// Free releases the sample buffers.
func (p *GPMPair) Free(lib Library, lock *GPMLock) {
	lock.mu.Lock()
	defer lock.mu.Unlock()
	for _, buf := range []*nvml.GpmSample{&p.prev, &p.cur} {
		if *buf != nil {
			_ = lib.GpmSampleFree(*buf) // nothing to do about a failure
			*buf = nil
		}
	}
	p.havePrev = false
}
