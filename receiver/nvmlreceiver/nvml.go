// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlreceiver // import "github.com/gpubuild/otelcol-gpubuild/receiver/nvmlreceiver"

import (
	"errors"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.opentelemetry.io/collector/component"

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

// sessionProvider is an extension that owns an NVML session (nvml_sampler).
type sessionProvider interface {
	NVMLSession() (nvmlapi.Library, *nvmlapi.GPMLock, bool)
}

// sharedLibrary is an NVML session the receiver borrows: its owner shuts
// it down, not the receiver, and its GPM calls take the owner's lock.
type sharedLibrary struct {
	library
	gpm *nvmlapi.GPMLock
}

func (sharedLibrary) Shutdown() nvml.Return { return nvml.SUCCESS }

// GPMLock is the owner's lock on the session's GPM calls.
func (l sharedLibrary) GPMLock() *nvmlapi.GPMLock { return l.gpm }

// gpmLockOf is the lock lib's GPM calls take: a borrowed session's owner's,
// else own (the receiver's own session).
func gpmLockOf(lib library, own *nvmlapi.GPMLock) *nvmlapi.GPMLock {
	if l, ok := lib.(interface{ GPMLock() *nvmlapi.GPMLock }); ok {
		return l.GPMLock()
	}
	return own
}

// sharedLoader borrows the session of the extension id; it fails while the
// extension has not loaded NVML, and the receiver retries as it does for
// its own.
func sharedLoader(host component.Host, id component.ID) (loadFunc, error) {
	ext, ok := host.GetExtensions()[id]
	if !ok {
		return nil, fmt.Errorf("nvml_session: no extension %q is configured and enabled in service::extensions", id)
	}
	p, ok := ext.(sessionProvider)
	if !ok {
		return nil, fmt.Errorf("nvml_session: extension %q does not own an NVML session (want an nvml_sampler)", id)
	}
	return func() (library, error) {
		lib, gpm, ok := p.NVMLSession()
		if !ok {
			return nil, errors.New("the NVML session's extension has not loaded NVML")
		}
		return sharedLibrary{lib, gpm}, nil
	}, nil
}
