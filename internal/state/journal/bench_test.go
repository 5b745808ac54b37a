// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"go.opentelemetry.io/collector/extension/xextension/storage"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/benchmem"
)

// BenchmarkBatch: one record per op, shaped as a request's derivation
// state: a 50-span request's six jobs, or a 1,000-span request's 110, each
// a set of a 32-hex-digit key and a 300-byte value, keys reused as a run's
// job is written at its start, its stages and its end; indexed
// (IndexAppends) as the derivation's journal is, and not. Checkpoints happen as the journal fills (8 MiB), into an in-memory
// storage: the figure is the append and the index, with their share of
// the checkpoint's reading back.
func BenchmarkBatch(b *testing.B) {
	for _, bc := range []struct {
		jobs    int
		indexed bool
	}{{6, true}, {6, false}, {110, true}, {110, false}} {
		b.Run(fmt.Sprintf("jobs=%d/indexed=%v", bc.jobs, bc.indexed), func(b *testing.B) {
			jobs, indexed := bc.jobs, bc.indexed
			ctx := context.Background()
			c, _, err := Open(ctx, newBase(), filepath.Join(b.TempDir(), "state.journal"), Config{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = c.Close(ctx) })
			if indexed {
				c.IndexAppends()
			}
			frozen := c.lastCheckpoint
			c.now = func() time.Time { return frozen }
			keys := make([]string, 16384)
			for i := range keys {
				keys[i] = fmt.Sprintf("jobs/%032x", uint64(i)*0x9e3779b97f4a7c15)
			}
			value := make([]byte, 300)
			ops := make([]*storage.Operation, jobs)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				for j := range ops {
					// Each job is written three times, over three requests.
					ops[j] = storage.SetOperation(keys[(i/3*jobs+j)%len(keys)], value)
				}
				if err := c.Batch(ctx, ops...); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkIndexMemory: the heap an indexed journal (IndexAppends) keeps
// for one checkpoint interval of a derivation at 20k spans/s (2,000 jobs
// a second, each written three times over ten seconds: 20,000 keys of 37
// bytes, values of 80, under the 8 MiB that checkpoints early), per key:
// at the end of its second interval (the first one's checkpoint behind
// it), and once that interval is written. The values are the file's, not
// the heap's; the storage keeps nothing.
func BenchmarkIndexMemory(b *testing.B) {
	const keys = 20000
	ctx := context.Background()
	value := make([]byte, 80)
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("jobs/%032x", uint64(i)*0x9e3779b97f4a7c15)
	}
	ops := make([]*storage.Operation, 6)
	interval := func(c *Client) {
		for n := 0; n < 3*keys; n += len(ops) {
			for j := range ops {
				ops[j] = storage.SetOperation(names[(n/3/len(ops)*len(ops)+j)%keys], value)
			}
			if err := c.Batch(ctx, ops...); err != nil {
				b.Fatal(err)
			}
		}
	}
	// journal is a journal after two intervals, the second checkpointed
	// or not.
	journal := func(checkpointed bool) any {
		c, _, err := Open(ctx, storage.NewNopClient(), filepath.Join(b.TempDir(), "state.journal"), Config{})
		if err != nil {
			b.Fatal(err)
		}
		c.IndexAppends()
		frozen := c.lastCheckpoint
		c.now = func() time.Time { return frozen }
		for i := range 2 {
			interval(c)
			if i == 0 || checkpointed {
				if err := c.Checkpoint(ctx); err != nil {
					b.Fatal(err)
				}
			}
		}
		return c
	}
	var held, after float64
	for b.Loop() {
		held = float64(benchmem.Retained(func() any { return journal(false) })) / keys
		after = float64(benchmem.Retained(func() any { return journal(true) })) / keys
	}
	runtime.KeepAlive(names)
	b.ReportMetric(held, "heap_bytes/key")
	b.ReportMetric(after, "heap_bytes/key_checkpointed")
}
