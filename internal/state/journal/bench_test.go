// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/xextension/storage"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/benchmem"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/storagetest"
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

// BenchmarkCheckpoint: one checkpoint into the real file_storage (bbolt,
// without fsync) of ten seconds of a state over random keys: a
// derivation's jobs (indexed journal, 300-byte values, each job written
// three times, a storage holding the 20,000 jobs of the job timeout) at
// 2,000 and at 20k spans/s, and the CloudWatch exporter's cumulative state
// at the base load (read back, 3,330 series of 100 bytes, every series
// rewritten by each of ten exports). The figure is the checkpoint alone:
// the appends run with the timer stopped.
func BenchmarkCheckpoint(b *testing.B) {
	for _, bc := range []struct {
		name            string
		stored, written int
		times           int
		value           int
		indexed         bool
	}{
		{"jobs/stored=20000/written=2000", 20000, 2000, 3, 300, true},
		{"jobs/stored=20000/written=20000", 20000, 20000, 3, 300, true},
		{"series/stored=3330/written=3330", 3330, 3330, 10, 100, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			base := fileStorageClient(b)
			c, _, err := Open(ctx, base, filepath.Join(b.TempDir(), "state.journal"), Config{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = c.Close(ctx) })
			if bc.indexed {
				c.IndexAppends()
			}
			frozen := c.lastCheckpoint
			c.now = func() time.Time { return frozen }
			rng := rand.New(rand.NewPCG(1, 2))
			keys := make([]string, bc.stored)
			for i := range keys {
				keys[i] = fmt.Sprintf("jobs/%016x%016x", rng.Uint64(), rng.Uint64())
			}
			value := make([]byte, bc.value)
			ops := make([]*storage.Operation, 6)
			if !bc.indexed {
				ops = make([]*storage.Operation, bc.stored) // a whole state per batch
			}
			// write writes the keys in batches of len(ops).
			write := func(keys []string) {
				for i := 0; i < len(keys); i += len(ops) {
					batch := ops[:min(len(ops), len(keys)-i)]
					for j := range batch {
						batch[j] = storage.SetOperation(keys[i+j], value)
					}
					if err := c.Batch(ctx, batch...); err != nil {
						b.Fatal(err)
					}
				}
			}
			write(keys)
			if err := c.Checkpoint(ctx); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				value[0] = byte(i)
				start := i * bc.written % bc.stored
				written := slices.Concat(keys[start:min(start+bc.written, bc.stored)], keys[:max(0, start+bc.written-bc.stored)])
				for range bc.times {
					write(written)
				}
				b.StartTimer()
				if err := c.Checkpoint(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// fileStorageClient is a client of a started file_storage extension in a
// new directory.
func fileStorageClient(b *testing.B) storage.Client {
	b.Helper()
	ctx := context.Background()
	ext := storagetest.FileStorage(b, b.TempDir(), false)
	b.Cleanup(func() { _ = ext.Shutdown(ctx) })
	client, err := ext.(storage.Extension).GetClient(ctx, component.KindConnector, component.MustNewID("buildjob"), "derivation")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = client.Close(ctx) })
	return client
}
