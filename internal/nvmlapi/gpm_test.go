// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlapi

import (
	"testing"
	"unsafe"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
)

// TestGPMRequestLayout checks the request nvmlGpmMetricsGet is given
// against nvml.h on 64-bit: version and numMetrics (4 bytes each), the two
// sample handles, then nvmlGpmMetric_t entries of 40 bytes (id, return,
// value, three C strings).
func TestGPMRequestLayout(t *testing.T) {
	assert.Equal(t, uintptr(40), cMetricSize)
	assert.Equal(t, uintptr(4), cNumMetricsSlot)
	assert.Equal(t, uintptr(24), cMetricsOffset)
}

// TestRawSample: the C handle is read out of go-nvml's sample; anything
// else (a mock's, none) is not a sample NVML can be given.
func TestRawSample(t *testing.T) {
	var handle [8]byte
	type nvmlGpmSample struct{ Handle *[8]byte } // go-nvml's shape
	p, ok := rawSample(nvmlGpmSample{&handle})
	assert.True(t, ok)
	assert.Equal(t, unsafe.Pointer(&handle), p)
	_, ok = rawSample(nil)
	assert.False(t, ok)
	_, ok = rawSample(nvmlGpmSample{})
	assert.False(t, ok)
	_, ok = rawSample(struct{ a, b *int }{})
	assert.False(t, ok)
	var none nvml.GpmSample
	_, ok = rawSample(none)
	assert.False(t, ok)
}
