// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// orderClient records the keys of every operation the storage is given,
// in order, and runs onBatch (when set) before each transaction.
type orderClient struct {
	*countingClient
	keys    []string
	onBatch func()
}

func (c *orderClient) Batch(ctx context.Context, ops ...*storage.Operation) error {
	if c.onBatch != nil {
		c.onBatch()
	}
	for _, op := range ops {
		c.keys = append(c.keys, op.Key)
	}
	return c.countingClient.Batch(ctx, ops...)
}

// indexedJournal is an indexed journal over an orderClient holding, as
// its last operation, a value of n bytes (random, some larger than a
// window's read) or a delete for each of keys random job keys, each
// written three times; checkpoints only when asked.
func indexedJournal(t *testing.T, keys int) (*Client, *orderClient, map[string][]byte) {
	return journalOf(t, keys, true)
}

// journalOf is indexedJournal, indexed or not.
func journalOf(t *testing.T, keys int, indexed bool) (*Client, *orderClient, map[string][]byte) {
	t.Helper()
	base := &orderClient{countingClient: newBase()}
	c, _ := open(t, base, t.TempDir()+"/state.journal")
	if indexed {
		c.IndexAppends()
	}
	c.now = func() time.Time { return c.lastCheckpoint }
	rng := rand.New(rand.NewPCG(3, uint64(keys)))
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("jobs/%016x", rng.Uint64())
	}
	last := map[string][]byte{}
	for round := range 3 {
		for i := 0; i < keys; i += 6 {
			var ops []*storage.Operation
			for _, k := range names[i:min(i+6, keys)] {
				if round == 2 && rng.IntN(10) == 0 {
					ops = append(ops, storage.DeleteOperation(k))
					last[k] = nil
					continue
				}
				n := rng.IntN(400)
				if rng.IntN(40) == 0 {
					n = windowBytes + rng.IntN(3*windowBytes)
				}
				v := make([]byte, n)
				for j := range v {
					v[j] = byte(rng.Uint32())
				}
				ops = append(ops, storage.SetOperation(k, v))
				last[k] = v
			}
			require.NoError(t, c.Batch(context.Background(), ops...))
		}
	}
	return c, base, last
}

// A checkpoint gives the storage each key's last operation in the keys'
// order, across all of its transactions, from an index of the appends or
// reading the journal back.
func TestCheckpointWritesInKeyOrder(t *testing.T) {
	for _, indexed := range []bool{true, false} {
		t.Run(fmt.Sprintf("indexed=%v", indexed), func(t *testing.T) {
			c, base, last := journalOf(t, 3000, indexed)
			require.NoError(t, c.Checkpoint(context.Background()))
			assert.Greater(t, base.batches, 2, "several transactions")
			assert.Len(t, base.keys, len(last), "each key once")
			assert.True(t, slices.IsSorted(base.keys), "in the keys' order")
			for k, v := range last {
				if v == nil {
					assert.Nil(t, base.Value(k), k)
					continue
				}
				assert.Equal(t, v, base.Value(k), k)
			}
		})
	}
}

// Mapped or through a window, the operations read back as written, in
// any order, whatever their size; an index that does not match the
// journal is an error.
func TestOpReadersReadInAnyOrder(t *testing.T) {
	c, _, last := indexedJournal(t, 600)
	mapped, done := opsAt(c.f, c.size)
	defer done()
	_, isMapped := mapped.(mappedOps)
	require.True(t, isMapped, "this system maps the journal")
	entries := slices.Clone(c.index.entries)
	rand.New(rand.NewPCG(4, 4)).Shuffle(len(entries), func(i, j int) { entries[i], entries[j] = entries[j], entries[i] })
	for name, r := range map[string]opReader{"mapped": mapped, "window": newWindow(c.f, c.size)} {
		for _, e := range entries {
			key := c.index.key(e)
			typ, value, err := r.op(e.pos, key)
			require.NoError(t, err, "%s: %s", name, key)
			if last[key] == nil {
				assert.Equal(t, byte(opDelete), typ, "%s: %s", name, key)
				continue
			}
			assert.Equal(t, byte(opSet), typ, "%s: %s", name, key)
			assert.True(t, bytes.Equal(last[key], value), "%s: %s", name, key)
		}
		e := entries[0]
		_, _, err := r.op(e.pos, c.index.key(e)+"x")
		assert.ErrorIs(t, err, errIndexMismatch, name)
		_, _, err = r.op(c.size, c.index.key(e))
		assert.ErrorIs(t, err, errIndexPastEnd, name)
	}
}

// A journal cut short under a checkpoint that maps it (by another
// process, or a page the disk cannot give back) fails the checkpoint,
// which the process survives; the index is kept for the next attempt.
func TestCheckpointOfAJournalCutShortFails(t *testing.T) {
	c, base, last := indexedJournal(t, 3000)
	base.onBatch = func() {
		require.NoError(t, os.Truncate(c.path, headerSize))
		base.onBatch = nil
	}
	err := c.Checkpoint(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "reading the journal")
	assert.Equal(t, len(last), c.index.len(), "the index is kept")
	_, ok := c.index.get(base.keys[0])
	assert.True(t, ok, "and finds its keys")
}

// A fault anywhere but in the mapped journal is not taken for one.
func TestCheckpointLeavesOtherFaultsAlone(t *testing.T) {
	c, base, _ := indexedJournal(t, 600)
	base.onBatch = func() {
		var p *orderClient
		_ = p.keys // a nil dereference in the storage
	}
	assert.Panics(t, func() { _ = c.Checkpoint(context.Background()) })
}
