// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"context"
	"fmt"
	"runtime/debug"
	"strings"

	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// IndexAppends makes the journal note, as each batch is appended, where
// each key's last operation is, so that a checkpoint reads only those
// operations: for a journal whose batches write a few keys each, many of
// them again (a derivation's jobs), at the cost of the index's memory
// (the key's bytes and some 40 more, until the next checkpoint). A journal
// that rewrites every key in every batch (a whole state) does better
// without.
func (c *Client) IndexAppends() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.size > headerSize {
		return // records appended before: they are not indexed
	}
	c.indexing, c.index = true, newKeyIndex()
}

// maxIndexKeys bounds the distinct keys a checkpoint indexes at once: a
// journal with more is written as consecutive segments, each the net
// effect of its own records.
const maxIndexKeys = 1 << 16

// note indexes the operations of a batch just appended, which start at
// starts. Past maxIndexKeys keys the index is dropped, and the checkpoint
// reads the journal back.
func (c *Client) note(ops []*storage.Operation, starts []int64) {
	if c.indexFull {
		return
	}
	for i, op := range ops {
		if op.Type != storage.Set && op.Type != storage.Delete {
			continue
		}
		if c.index.len() >= c.maxIndexKeys || !c.index.room(len(op.Key)) {
			if _, ok := c.index.get(op.Key); !ok {
				c.indexFull = true
				c.index.reset()
				return
			}
		}
		c.index.set(op.Key, starts[i]) // copies a new key: op.Key may be the caller's buffer
	}
}

// applyIndexed writes the last operation of each key, as the index has
// them, into the storage. When the storage refuses, the index is left as
// it was, for the next checkpoint.
func (c *Client) applyIndexed(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			c.index.reindex()
		}
	}()
	return c.writeLast(ctx, &c.index, c.size)
}

// writeLast writes the operations x points at, in the journal's first
// size bytes, into the storage in the keys' order, chunk by chunk, and
// leaves x sorted by key. Keys such as a derivation's jobs or a
// cumulative state's series are random: chunks in the journal's order
// would each touch leaf pages across the whole bbolt tree (a transaction
// rewrites every page it touches), in the keys' order each chunk rewrites
// its own range of them (BenchmarkCheckpoint). The operations are read
// from the journal mapped into memory (opsAt).
func (c *Client) writeLast(ctx context.Context, x *keyIndex, size int64) (err error) {
	x.sortByKey()
	ops, done := opsAt(c.f, size)
	defer done()
	// A page of a mapped journal that cannot be read (the file cut short,
	// a read error of the disk) faults on access: the checkpoint fails
	// instead of the process, the journal kept.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			fault, ok := r.(interface{ Addr() uintptr })
			if !ok || !ops.holds(fault.Addr()) {
				panic(r)
			}
			err = fmt.Errorf("reading the journal %s: a page of it could not be read (the file cut short, or a read error of the disk)", c.path)
		}
	}()
	ch := newChunk(int(min(size, chunkBytes)))
	for _, e := range x.entries {
		key := x.key(e)
		typ, value, err := ops.op(e.pos, key)
		if err != nil {
			return fmt.Errorf("reading the journal %s: %w", c.path, err)
		}
		// A copy of the key: the index's buffer is reused.
		if err := ch.add(ctx, c.base, typ, strings.Clone(key), value); err != nil {
			return fmt.Errorf("writing the journal %s into the storage: %w", c.path, err)
		}
	}
	if err := ch.flush(ctx, c.base); err != nil {
		return fmt.Errorf("writing the journal %s into the storage: %w", c.path, err)
	}
	return nil
}
