// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlapi

import (
	"reflect"
	"testing"
	"unsafe"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hasPointers reports whether a value of t holds a pointer the garbage
// collector follows.
func hasPointers(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.UnsafePointer, reflect.Map, reflect.Chan, reflect.Func, reflect.Interface, reflect.Slice, reflect.String:
		return true
	case reflect.Array:
		return t.Len() > 0 && hasPointers(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if hasPointers(t.Field(i).Type) {
				return true
			}
		}
	}
	return false
}

// TestGpmMetricLayout checks what cMetrics relies on: go-nvml's metrics
// array is at least as large as C's, and C's values written over it never
// land on a Go pointer.
func TestGpmMetricLayout(t *testing.T) {
	require.Equal(t, uintptr(40), unsafe.Sizeof(cMetric{}), "nvmlGpmMetric_t on 64-bit")
	var mg nvml.GpmMetricsGetType
	require.GreaterOrEqual(t, unsafe.Sizeof(mg.Metrics), uintptr(len(mg.Metrics))*unsafe.Sizeof(cMetric{}))
	assert.False(t, hasPointers(reflect.TypeOf(mg.Metrics)), "C's metric values are written over go-nvml's GpmMetric array")
	t.Logf("go-nvml GpmMetric: %d bytes (C: 40)", unsafe.Sizeof(nvml.GpmMetric{}))
}
