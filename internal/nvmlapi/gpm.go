// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlapi // import "github.com/gpubuild/otelcol-gpubuild/internal/nvmlapi"

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>

// nvmlGpmMetricsGet_t as nvml.h lays it out (NVML_GPM_METRICS_GET_VERSION 1).
// NVML reads and writes the first numMetrics entries of metrics.
typedef struct {
	unsigned int metricId;
	unsigned int nvmlReturn;
	double value;
	struct { char *shortName; char *longName; char *unit; } metricInfo;
} gpmMetric;

#define GPM_METRICS 4

typedef struct {
	unsigned int version;
	unsigned int numMetrics;
	void *sample1;
	void *sample2;
	gpmMetric metrics[GPM_METRICS];
} gpmMetricsGet;

// NVML is loaded by go-nvml with RTLD_GLOBAL: its symbols are in the
// global scope.
static void *gpm_metrics_get_fn(void) { return dlsym(RTLD_DEFAULT, "nvmlGpmMetricsGet"); }
static int gpm_metrics_get(void *fn, gpmMetricsGet *mg) { return ((int (*)(gpmMetricsGet *))fn)(mg); }
*/
import "C"

import (
	"reflect"
	"slices"
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
// the C request for the metrics between it and the next, so that each
// sampling gives the metrics of the interval since the previous one. Not
// safe for concurrent use.
//
// nvmlGpmMetricsGet is called directly, on a request in C memory: go-nvml
// v0.13.0-1's binding lays the metrics out wrongly (its GpmMetric is 1,624
// bytes, C's 40) and copies its 330 KB request twice per call.
type GPMPair struct {
	prev, cur nvml.GpmSample
	havePrev  bool
	req       *C.gpmMetricsGet // allocated at the first metrics request
	fn        unsafe.Pointer   // nvmlGpmMetricsGet
}

// Take reads a new sample with get (a GPU's GpmSampleGet, or its parent's
// GpmMigSampleGet for a GPU instance) and, when a previous sample exists,
// returns the metrics between the two: ok is false on the first sampling.
// ret is the first NVML failure; the previous sample is then kept, so the
// next interval spans the failed sampling (GPM counters accumulate: that
// interval's figures are still exact).
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
		if v, ret = p.metrics(); ret != nvml.SUCCESS {
			return v, false, ret // prev kept, as for a failed sample
		}
		ok = slices.Contains(v.OK[:], true)
	}
	p.prev, p.cur = p.cur, p.prev
	p.havePrev = true
	return v, ok, nvml.SUCCESS
}

// metrics asks NVML for the metrics between p.prev and p.cur.
func (p *GPMPair) metrics() (v GPMValues, ret nvml.Return) {
	s1, ok1 := rawSample(p.prev)
	s2, ok2 := rawSample(p.cur)
	if !ok1 || !ok2 {
		return v, nvml.ERROR_NOT_SUPPORTED // not go-nvml's samples (a mock): no GPM
	}
	if p.fn == nil {
		if p.fn = C.gpm_metrics_get_fn(); p.fn == nil {
			return v, nvml.ERROR_FUNCTION_NOT_FOUND
		}
	}
	if p.req == nil {
		p.req = (*C.gpmMetricsGet)(C.calloc(1, C.sizeof_gpmMetricsGet))
	}
	req := p.req
	*req = C.gpmMetricsGet{version: C.uint(nvml.GPM_METRICS_GET_VERSION), numMetrics: C.GPM_METRICS, sample1: s1, sample2: s2}
	for i, id := range gpmMetricIDs {
		req.metrics[i].metricId = C.uint(id)
	}
	if ret := nvml.Return(C.gpm_metrics_get(p.fn, req)); ret != nvml.SUCCESS {
		return v, ret
	}
	for i := range NumGPMMetrics {
		if nvml.Return(req.metrics[i].nvmlReturn) == nvml.SUCCESS {
			v.Percent[i], v.OK[i] = float64(req.metrics[i].value), true
		}
	}
	return v, nvml.SUCCESS
}

// The request's layout, checked against nvml.h's by TestGPMRequestLayout.
const (
	cMetricSize     = unsafe.Sizeof(C.gpmMetric{})
	cMetricsOffset  = unsafe.Offsetof(C.gpmMetricsGet{}.metrics)
	cNumMetricsSlot = unsafe.Offsetof(C.gpmMetricsGet{}.numMetrics)
)

// rawSample is the C handle inside go-nvml's GPM sample (its one field).
func rawSample(s any) (unsafe.Pointer, bool) {
	v := reflect.ValueOf(s)
	if v.Kind() != reflect.Struct || v.NumField() != 1 || v.Field(0).Kind() != reflect.Pointer || v.Field(0).IsNil() {
		return nil, false
	}
	return v.Field(0).UnsafePointer(), true
}

// Reset drops the previous sample (a GPU lost and found again: its
// counters may have restarted).
func (p *GPMPair) Reset() { p.havePrev = false }

// Free releases the sample buffers and the request.
func (p *GPMPair) Free(lib Library, lock *GPMLock) {
	lock.mu.Lock()
	defer lock.mu.Unlock()
	for _, buf := range []*nvml.GpmSample{&p.prev, &p.cur} {
		if *buf != nil {
			_ = lib.GpmSampleFree(*buf) // nothing to do about a failure
			*buf = nil
		}
	}
	if p.req != nil {
		C.free(unsafe.Pointer(p.req))
		p.req = nil
	}
	p.havePrev = false
}
