// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlreceiver // import "github.com/gpubuild/otelcol-gpubuild/receiver/nvmlreceiver"

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpubuild/otelcol-gpubuild/internal/nvmlapi"
)

// The NVML boundary is shared with the nvml sampler extension.
type (
	library  = nvmlapi.Library
	device   = nvmlapi.Device
	loadFunc = nvmlapi.LoadFunc
	symbols  = nvmlapi.Symbols
)

var errGPULost = nvmlapi.ErrGPULost

func newSystemLoader(opts ...nvml.LibraryOption) loadFunc { return nvmlapi.NewSystemLoader(opts...) }

func lookupSymbols(lib library) symbols { return nvmlapi.LookupSymbols(lib) }

func isUnsupported(ret nvml.Return) bool { return nvmlapi.IsUnsupported(ret) }

func sampleValue(t nvml.ValueType, v [8]byte) (float64, bool) { return nvmlapi.SampleValue(t, v) }

// averageSamples averages the samples newer than lastTs and returns the
// newest timestamp seen, to pass as lastTs next time. ok is false when
// there is no such sample.
func averageSamples(t nvml.ValueType, samples []nvml.Sample, lastTs uint64) (avg float64, newest uint64, ok bool) {
	newest = lastTs
	var sum float64
	var n int
	for i := range samples {
		s := &samples[i]
		if s.TimeStamp <= lastTs {
			continue
		}
		v, valid := sampleValue(t, s.SampleValue)
		if !valid {
			continue
		}
		sum += v
		n++
		if s.TimeStamp > newest {
			newest = s.TimeStamp
		}
	}
	if n == 0 {
		return 0, lastTs, false
	}
	return sum / float64(n), newest, true
}

// cString converts a NUL-terminated byte array from an NVML struct.
func cString(b []uint8) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
