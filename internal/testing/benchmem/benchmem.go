// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package benchmem measures, for benchmarks, the heap a data structure
// keeps: the figure behind the "heap_bytes/…" metrics in BENCHMARKS.md.
package benchmem // import "github.com/gpubuild/otelcol-gpubuild/internal/testing/benchmem"

import "runtime"

// Retained returns the heap bytes that what build returns still holds
// after a collection: the live heap after build less the live heap before.
// Inputs that build uses but that are not part of the measure are made
// before the call, and kept alive by the caller until it returns.
func Retained(build func() any) int64 {
	bytes, _ := RetainedWithObjects(build)
	return bytes
}

// RetainedWithObjects is Retained, with the heap objects kept beside the
// bytes: each is one more for a collection to mark.
func RetainedWithObjects(build func() any) (bytes, objects int64) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	kept := build()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(kept)
	return int64(after.HeapAlloc) - int64(before.HeapAlloc), int64(after.HeapObjects) - int64(before.HeapObjects)
}
