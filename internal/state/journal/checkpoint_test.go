// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// hookedClient runs onBatch (when set) before each storage transaction.
type hookedClient struct {
	*countingClient
	onBatch func()
}

func (c *hookedClient) Batch(ctx context.Context, ops ...*storage.Operation) error {
	if c.onBatch != nil {
		c.onBatch()
	}
	return c.countingClient.Batch(ctx, ops...)
}

// A journal cut short under a checkpoint (by another process) fails the
// checkpoint, after its first transaction; the index is kept for the next
// attempt.
func TestCheckpointOfAJournalCutShortFails(t *testing.T) {
	ctx := context.Background()
	base := &hookedClient{countingClient: newBase()}
	c, _ := open(t, base, t.TempDir()+"/state.journal")
	c.IndexAppends()
	c.now = func() time.Time { return c.lastCheckpoint }
	rng := rand.New(rand.NewPCG(3, 3))
	keys := make([]string, 3000)
	for i := range keys {
		keys[i] = fmt.Sprintf("jobs/%016x", rng.Uint64())
		require.NoError(t, c.Batch(ctx, storage.SetOperation(keys[i], make([]byte, 300))))
	}
	base.onBatch = func() {
		require.NoError(t, os.Truncate(c.path, headerSize))
		base.onBatch = nil
	}
	err := c.Checkpoint(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "reading the journal")
	assert.Equal(t, 1, base.batches, "the first transaction went in")
	assert.Equal(t, len(keys), c.index.len(), "the index is kept")
	_, ok := c.index.get(keys[0])
	assert.True(t, ok, "and finds its keys")
}

// faultyFile fails, once each when set, the cut of the journal (Truncate)
// and the write of its header (WriteAt at 0); the rest goes to the file.
type faultyFile struct {
	file
	failCut, failHeader bool
}

var errFault = errors.New("injected I/O error")

func (f *faultyFile) Truncate(size int64) error {
	if f.failCut {
		f.failCut = false
		return errFault
	}
	return f.file.Truncate(size)
}

func (f *faultyFile) WriteAt(b []byte, off int64) (int, error) {
	if off == 0 && f.failHeader {
		f.failHeader = false
		return 0, errFault
	}
	return f.file.WriteAt(b, off)
}

// A checkpoint whose header write fails once the records are cut off
// fails, and the batches after it are written behind the header: a
// killed process's next start applies them.
func TestBatchesAfterAFailedHeaderWriteAreKept(t *testing.T) {
	ctx := context.Background()
	base, path, c := fresh(t)
	c.now = func() time.Time { return c.lastCheckpoint }
	ff := &faultyFile{file: c.f}
	c.f = ff
	require.NoError(t, c.Set(ctx, "a", []byte("1")))
	ff.failHeader = true
	require.ErrorIs(t, c.Checkpoint(ctx), errFault)
	assert.Equal(t, map[string][]byte{"a": []byte("1")}, base.Data(), "written before the journal was emptied")
	require.NoError(t, c.Set(ctx, "b", []byte("2")))
	require.NoError(t, ff.Close()) // killed: no checkpoint

	r := reopen(t, base, path)
	assert.Equal(t, Replay{Records: 1}, r)
	assert.Equal(t, map[string][]byte{"a": []byte("1"), "b": []byte("2")}, base.Data())
}

// A checkpoint that wrote the storage but could not cut the journal off
// fails and keeps the records and an index that still finds each key
// once; the next checkpoint writes what followed.
func TestCheckpointWhoseCutFailsKeepsTheIndex(t *testing.T) {
	ctx := context.Background()
	base, _, c := fresh(t)
	c.IndexAppends()
	c.now = func() time.Time { return c.lastCheckpoint }
	ff := &faultyFile{file: c.f}
	c.f = ff
	keys := make([]string, 40)
	for i := range keys {
		keys[i] = fmt.Sprintf("jobs/%02d", i)
		require.NoError(t, c.Set(ctx, keys[i], []byte("1")))
	}
	for _, k := range keys[:20] {
		// Their last operations now come after the others': the
		// checkpoint sorts the index into another order than its table's.
		require.NoError(t, c.Set(ctx, k, []byte("1")))
	}
	ff.failCut = true
	require.ErrorIs(t, c.Checkpoint(ctx), errFault)
	for _, k := range keys {
		require.NoError(t, c.Set(ctx, k, []byte("2")))
	}
	assert.Equal(t, len(keys), c.index.len(), "each key indexed once")
	require.NoError(t, c.Checkpoint(ctx))
	for _, k := range keys {
		assert.Equal(t, []byte("2"), base.Value(k), k)
	}
	assert.Equal(t, int64(headerSize), c.size)
}
