// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"unsafe"

	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// lastOp is the last operation of key since the checkpoint, at offset off.
type lastOp struct {
	key string
	off int64
}

// IndexAppends makes the journal note, as each batch is appended, where
// each key's last operation is, so that a checkpoint reads only those
// operations: for a journal whose batches write a few keys each, many of
// them again (a derivation's jobs), at the cost of the index's memory,
// some 100 bytes a key until the next checkpoint. A journal that rewrites
// every key in every batch (a whole state) does better without.
func (c *Client) IndexAppends() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.size > headerSize {
		return // records appended before: they are not indexed
	}
	c.indexing, c.index = true, map[string]int{}
}

// maxIndexKeys bounds the distinct keys a checkpoint indexes at once (some
// 60 bytes each): a journal with more is written as consecutive segments,
// each the net effect of its own records.
const maxIndexKeys = 1 << 16

// note indexes the operations of a batch just appended, which start at
// starts.
func (c *Client) note(ops []*storage.Operation, starts []int64) {
	if c.indexFull {
		return
	}
	for i, op := range ops {
		if op.Type != storage.Set && op.Type != storage.Delete {
			continue
		}
		if j, ok := c.index[op.Key]; ok {
			c.last[j].off = starts[i]
			continue
		}
		if len(c.last) >= c.maxIndexKeys {
			c.indexFull = true
			c.dropIndex()
			return
		}
		// The key may be the caller's buffer: the index keeps a copy, in
		// one buffer for all (one that grows leaves the keys in the
		// previous one, which they keep until the next checkpoint).
		if len(c.keys)+len(op.Key) > cap(c.keys) {
			c.keys = make([]byte, 0, max(2*cap(c.keys), 4096, len(op.Key)))
		}
		start := len(c.keys)
		c.keys = append(c.keys, op.Key...)
		key := unsafe.String(unsafe.SliceData(c.keys[start:]), len(op.Key))
		c.index[key] = len(c.last)
		c.last = append(c.last, lastOp{key: key, off: starts[i]})
	}
}

// dropIndex empties the index, keeping its map and list for the next
// checkpoint interval, which has about as many keys. The keys' buffer is
// not reused: the storage was handed its keys and may keep them.
func (c *Client) dropIndex() {
	clear(c.index)
	clear(c.last)
	c.last = c.last[:0]
	c.keys = make([]byte, 0, cap(c.keys))
}

// applyIndexed writes the last operation of each key, as the index has
// them, into the storage, in the order of the journal, chunk by chunk.
func (c *Client) applyIndexed(ctx context.Context) error {
	ops := append(c.sorted[:0], c.last...)
	slices.SortFunc(ops, func(a, b lastOp) int { return cmp.Compare(a.off, b.off) })
	defer func() { clear(ops); c.sorted = ops[:0] }()
	ch := newChunk(int(min(c.size, chunkBytes)))
	r := window{f: c.f, size: c.size, buf: make([]byte, min(c.size, 64<<10))}
	for _, op := range ops {
		typ, value, err := r.op(op.off, len(op.key))
		if err != nil {
			return fmt.Errorf("reading the journal %s: %w", c.path, err)
		}
		if err := ch.addKey(ctx, c.base, typ, op.key, value); err != nil {
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
	f     *os.File
	size  int64 // the end of the whole records
	buf   []byte
	start int64 // the offset of buf[0]
	n     int   // bytes of buf read
}

// op returns the type and value (for a set) of the operation at off,
// whose key is keyLen bytes long; the value is valid until the next call.
func (w *window) op(off int64, keyLen int) (byte, []byte, error) {
	for {
		if off >= w.start && off < w.start+int64(w.n) {
			b := w.buf[off-w.start : w.n]
			key, rest, ok := readBytes(b[1:])
			if ok && len(key) != keyLen {
				return 0, nil, errors.New("the index does not match the journal")
			}
			if ok && b[0] == opDelete {
				return opDelete, nil, nil
			}
			if ok {
				if v, _, ok := readBytes(rest); ok {
					return opSet, v, nil
				}
			}
			if off == w.start && w.n == len(w.buf) && int64(len(w.buf)) < w.size-off {
				w.buf = make([]byte, min(2*len(w.buf), int(w.size-off))) // an operation larger than the buffer
			} else if off == w.start {
				return 0, nil, errors.New("the index points past the journal's records")
			}
		}
		w.start, w.n = off, 0
		n, err := w.f.ReadAt(w.buf[:min(int64(len(w.buf)), w.size-off)], off)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, nil, err
		}
		w.n = n
		if n == 0 {
			return 0, nil, errors.New("the index points past the journal's records")
		}
	}
}
