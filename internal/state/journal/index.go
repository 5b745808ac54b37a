// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"context"
	"errors"
	"fmt"
	"io"
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
// size bytes, into the storage in the journal's order, chunk by chunk, and
// leaves x sorted by position: the operations are read forward through
// one window. (The keys' order, from the journal mapped into memory, was
// no faster in the sidecar, whose checkpoints are mostly bbolt's seeks
// and deletes: BENCHMARKS.md, "State cost".)
func (c *Client) writeLast(ctx context.Context, x *keyIndex, size int64) error {
	x.sortByPos()
	ch := newChunk(int(min(size, chunkBytes)))
	r := window{f: c.f, size: size, buf: make([]byte, min(size, 64<<10))}
	for _, e := range x.entries {
		key := x.key(e)
		typ, value, err := r.op(e.pos, key)
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

// window reads operations of the journal at increasing offsets through
// one buffer.
type window struct {
	f     io.ReaderAt
	size  int64 // the end of the whole records
	buf   []byte
	start int64 // the offset of buf[0]
	n     int   // bytes of buf read
}

// op returns the type and value (for a set) of the operation at off,
// which must be one of key's; the value is valid until the next call.
func (w *window) op(off int64, key string) (byte, []byte, error) {
	for {
		if off >= w.start && off < w.start+int64(w.n) {
			typ, k, v, _, ok := parseOp(w.buf[off-w.start : w.n])
			if ok && string(k) != key {
				return 0, nil, errors.New("the index does not match the journal")
			}
			if ok {
				return typ, v, nil
			}
			if off == w.start && w.n == len(w.buf) && int64(len(w.buf)) < w.size-off {
				w.buf = make([]byte, min(2*len(w.buf), int(w.size-off))) // an operation larger than the buffer
			} else if off == w.start {
				return 0, nil, errors.New("the index points past the journal's records")
			}
		}
		w.start, w.n = off, 0
		n, err := w.f.ReadAt(w.buf[:min(int64(len(w.buf)), max(w.size-off, 0))], off)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, nil, err
		}
		w.n = n
		if n == 0 {
			return 0, nil, errors.New("the index points past the journal's records")
		}
	}
}
