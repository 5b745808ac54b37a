// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"bytes"
	"context"
	"fmt"

	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// chunkBytes bounds the keys and values one storage transaction of a
// checkpoint carries, and so the memory a checkpoint takes: a large journal
// is written in several transactions, which replay makes safe (the journal
// is emptied only after the last).
const chunkBytes = 256 << 10

// chunk collects operations for one storage transaction, their values
// copied into one arena that never grows (the operations point into it).
type chunk struct {
	arena []byte
	bytes int // keys and values
	ops   []storage.Operation
	ptrs  []*storage.Operation
}

func newChunk(capacity int) *chunk {
	return &chunk{arena: make([]byte, 0, capacity)}
}

// add adds one operation, first writing the chunk when the operation's key
// and value would take it past its capacity. The key goes to the storage
// as it is (a storage may keep it): it must be no buffer of the caller's.
func (ch *chunk) add(ctx context.Context, base storage.Client, typ byte, key string, value []byte) error {
	if len(ch.ops) > 0 && ch.bytes+len(key)+len(value) > cap(ch.arena) {
		if err := ch.flush(ctx, base); err != nil {
			return err
		}
	}
	op := storage.Operation{Key: key, Type: storage.Set}
	if typ == opDelete {
		op.Type = storage.Delete
	} else {
		op.Value = ch.keep(value)
	}
	ch.bytes += len(key) + len(value)
	ch.ops = append(ch.ops, op)
	return nil
}

// keep copies v into the arena, or on its own when the arena is full (a
// value larger than a chunk).
func (ch *chunk) keep(v []byte) []byte {
	if len(ch.arena)+len(v) > cap(ch.arena) {
		return bytes.Clone(v)
	}
	start := len(ch.arena)
	ch.arena = append(ch.arena, v...)
	return ch.arena[start:len(ch.arena):len(ch.arena)]
}

// flush writes the chunk's operations in one transaction and empties it.
func (ch *chunk) flush(ctx context.Context, base storage.Client) error {
	if len(ch.ops) == 0 {
		return nil
	}
	ch.ptrs = ch.ptrs[:0]
	for i := range ch.ops {
		ch.ptrs = append(ch.ptrs, &ch.ops[i])
	}
	err := base.Batch(ctx, ch.ptrs...)
	clear(ch.ptrs)
	if err != nil {
		return err
	}
	clear(ch.ops)
	ch.arena, ch.ops, ch.bytes = ch.arena[:0], ch.ops[:0], 0
	return nil
}

// Checkpoint writes the journal's records into the storage (one
// transaction per chunkBytes of records) and empties the journal.
func (c *Client) Checkpoint(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.checkpointLocked(ctx)
}

func (c *Client) checkpointLocked(ctx context.Context) error {
	c.lastCheckpoint = c.now()
	if c.size <= headerSize {
		return nil
	}
	err := c.applyJournal(ctx)
	c.checkpointErr = err
	return err
}

func (c *Client) applyJournal(ctx context.Context) error {
	if c.indexing && !c.indexFull {
		if err := c.applyIndexed(ctx); err != nil {
			return err
		}
	} else {
		_, _, formatErr, err := c.apply(ctx, c.size)
		if err == nil {
			err = formatErr
		}
		if err != nil {
			return err
		}
	}
	// Written: the records may go. Should cutting them off fail they
	// stay, and are applied again, to the same effect (reset).
	err := c.reset()
	if c.indexing {
		// The index follows the file: empty once the records are cut
		// off, else usable again (writeLast left it sorted by position).
		if c.size == headerSize {
			c.index.reset()
			c.indexFull = false
		} else {
			c.index.reindex()
		}
	}
	if err != nil {
		return fmt.Errorf("emptying the journal %s: %w", c.path, err)
	}
	return nil
}

// CheckpointError is the error of the last checkpoint if it failed.
func (c *Client) CheckpointError() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.checkpointErr
}
