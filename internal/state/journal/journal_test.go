// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/extension/xextension/storage"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/storagetest"
)

// countingClient counts the storage transactions (Batch calls) and can
// refuse them, all or from the (refuseFrom)th on.
type countingClient struct {
	*storagetest.Client
	batches    int
	refuse     error
	refuseFrom int
}

func (c *countingClient) Batch(ctx context.Context, ops ...*storage.Operation) error {
	if c.refuse != nil && c.batches+1 >= c.refuseFrom {
		return c.refuse
	}
	c.batches++
	return c.Client.Batch(ctx, ops...)
}

func newBase() *countingClient {
	return &countingClient{Client: storagetest.NewClient(nil)}
}

func open(t *testing.T, base storage.Client, path string) (*Client, Replay) {
	t.Helper()
	c, r, err := Open(context.Background(), base, path, Config{})
	require.NoError(t, err)
	return c, r
}

// reopen opens the journal at path again, as the next process would,
// closes it when the test ends and returns what its replay found.
func reopen(t *testing.T, base storage.Client, path string) Replay {
	t.Helper()
	c, r := open(t, base, path)
	t.Cleanup(func() { require.NoError(t, c.Close(context.Background())) })
	return r
}

// fresh opens a journal in a new directory over an empty storage.
func fresh(t *testing.T) (*countingClient, string, *Client) {
	t.Helper()
	base := newBase()
	path := filepath.Join(t.TempDir(), "state.journal")
	c, _ := open(t, base, path)
	return base, path, c
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	require.NoError(t, err)
	return st.Size()
}

func TestBatchesReachTheStorageInOneTransactionAtCheckpoint(t *testing.T) {
	ctx := context.Background()
	base, path, c := fresh(t)

	for i := range 50 {
		require.NoError(t, c.Batch(ctx,
			storage.SetOperation("job/"+string(rune('a'+i%26)), []byte{byte(i)}),
			storage.SetOperation("series/1", []byte{byte(i)}),
		))
	}
	require.NoError(t, c.Batch(ctx, storage.DeleteOperation("job/b")))
	assert.Zero(t, base.batches, "no storage transaction before the checkpoint")
	assert.Nil(t, base.Value("series/1"))
	assert.Greater(t, fileSize(t, path), int64(headerSize))

	require.NoError(t, c.Checkpoint(ctx))
	assert.Equal(t, 1, base.batches, "the journal's 51 batches in one transaction")
	assert.Equal(t, []byte{49}, base.Value("series/1"), "the last value wins")
	assert.Equal(t, []byte{48}, base.Value("job/w"))
	assert.Nil(t, base.Value("job/b"), "deleted after its last set")
	assert.Len(t, base.Data(), 26, "job/a..job/z less job/b, and series/1")
	assert.Equal(t, int64(headerSize), fileSize(t, path), "emptied")

	require.NoError(t, c.Close(ctx))
	assert.Equal(t, 1, base.batches, "nothing left to write at close")
}

func TestCheckpointEveryInterval(t *testing.T) {
	ctx := context.Background()
	base := newBase()
	c, _ := open(t, base, filepath.Join(t.TempDir(), "state.journal"))
	now := time.Unix(1000, 0)
	c.now = func() time.Time { return now }
	c.lastCheckpoint = now

	require.NoError(t, c.Set(ctx, "a", []byte("1")))
	now = now.Add(DefaultCheckpointInterval - time.Millisecond)
	require.NoError(t, c.Set(ctx, "b", []byte("2")))
	assert.Zero(t, base.batches)
	now = now.Add(time.Millisecond)
	require.NoError(t, c.Set(ctx, "c", []byte("3")))
	assert.Equal(t, 1, base.batches, "the batch after the interval checkpoints")
	assert.Equal(t, map[string][]byte{"a": []byte("1"), "b": []byte("2"), "c": []byte("3")}, base.Data())
}

func TestReopenAppliesWhatAKilledProcessLeft(t *testing.T) {
	ctx := context.Background()
	base := newBase()
	require.NoError(t, base.Set(ctx, "old", []byte("kept")))
	require.NoError(t, base.Set(ctx, "gone", []byte("x")))
	path := filepath.Join(t.TempDir(), "state.journal")
	c, _ := open(t, base, path)
	require.NoError(t, c.Set(ctx, "a", []byte("1")))
	require.NoError(t, c.Batch(ctx, storage.SetOperation("a", []byte("2")), storage.DeleteOperation("gone")))
	require.NoError(t, c.Set(ctx, "b", []byte("3")))
	// Killed: the descriptor closes, no checkpoint runs.
	require.NoError(t, c.f.Close())
	assert.Zero(t, base.batches)

	r := reopen(t, base, path)
	assert.Equal(t, Replay{Records: 3}, r)
	assert.Equal(t, map[string][]byte{"old": []byte("kept"), "a": []byte("2"), "b": []byte("3")}, base.Data())
	assert.Equal(t, int64(headerSize), fileSize(t, path))
}

func TestReplayTwiceIsReplayOnce(t *testing.T) {
	// A crash after the checkpoint's transaction and before the journal
	// was emptied replays records the storage already holds.
	ctx := context.Background()
	base, path, c := fresh(t)
	require.NoError(t, c.Set(ctx, "a", []byte("1")))
	require.NoError(t, c.Delete(ctx, "a"))
	require.NoError(t, c.Set(ctx, "b", []byte("2")))
	left, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, c.Checkpoint(ctx))
	want := base.Data()
	require.NoError(t, c.f.Close())
	require.NoError(t, os.WriteFile(path, left, 0o600))

	r := reopen(t, base, path)
	assert.Equal(t, 3, r.Records)
	assert.Equal(t, want, base.Data())
}

func TestTornOrDamagedTailIsDiscarded(t *testing.T) {
	for name, damage := range map[string]func([]byte) []byte{
		"torn":    func(b []byte) []byte { return b[:len(b)-3] },
		"flipped": func(b []byte) []byte { b[len(b)-1] ^= 0xff; return b },
		"garbage": func(b []byte) []byte { return append(b, 7, 0, 0, 0, 1, 2, 3, 4, 5) },
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			base := newBase()
			path := filepath.Join(t.TempDir(), "state.journal")
			c, _ := open(t, base, path)
			require.NoError(t, c.Set(ctx, "a", []byte("1")))
			require.NoError(t, c.Set(ctx, "b", []byte("2")))
			whole := fileSize(t, path)
			require.NoError(t, c.Set(ctx, "c", []byte("3")))
			require.NoError(t, c.f.Close())
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			if name != "garbage" {
				b = damage(b)
			} else {
				b = damage(b[:whole]) // the third record replaced by garbage
			}
			require.NoError(t, os.WriteFile(path, b, 0o600))

			c2, r := open(t, base, path)
			defer func() { require.NoError(t, c2.Close(ctx)) }()
			assert.Equal(t, 2, r.Records)
			assert.Equal(t, int64(len(b))-whole, r.DiscardedBytes)
			assert.NoError(t, r.Err)
			assert.Equal(t, map[string][]byte{"a": []byte("1"), "b": []byte("2")}, base.Data())

			// Records written after the discarded tail are read back.
			require.NoError(t, c2.Set(ctx, "d", []byte("4")))
			require.NoError(t, c2.f.Close())
			c3, r := open(t, base, path)
			c2 = c3
			assert.Equal(t, Replay{Records: 1}, r)
			assert.Equal(t, []byte("4"), base.Value("d"))
		})
	}
}

func TestUnknownFormatIsSetAsideUntouched(t *testing.T) {
	ctx := context.Background()
	base := newBase()
	path := filepath.Join(t.TempDir(), "state.journal")
	later := []byte("gpbj\x02\x00\x00\x00 records of a later version")
	require.NoError(t, os.WriteFile(path, later, 0o600))

	c, r := open(t, base, path)
	defer func() { require.NoError(t, c.Close(ctx)) }()
	require.ErrorIs(t, r.Err, ErrUnknownFormat)
	assert.Equal(t, int64(len(later)), r.DiscardedBytes)
	assert.Empty(t, base.Data())
	kept, err := os.ReadFile(path + ".unknown-format")
	require.NoError(t, err)
	assert.Equal(t, later, kept)
	require.NoError(t, c.Set(ctx, "a", []byte("1")))
	require.NoError(t, c.Checkpoint(ctx))
	assert.Equal(t, []byte("1"), base.Value("a"))
}

func TestDamagedHeaderIsDiscarded(t *testing.T) {
	base := newBase()
	path := filepath.Join(t.TempDir(), "state.journal")
	require.NoError(t, os.WriteFile(path, []byte("not a journal at all"), 0o600))
	c, r := open(t, base, path)
	defer func() { require.NoError(t, c.Close(context.Background())) }()
	require.Error(t, r.Err)
	assert.NotErrorIs(t, r.Err, ErrUnknownFormat)
	assert.Equal(t, int64(20), r.DiscardedBytes)
	assert.Equal(t, int64(headerSize), fileSize(t, path))
}

func TestFailedCheckpointKeepsTheRecords(t *testing.T) {
	ctx := context.Background()
	base, path, c := fresh(t)
	require.NoError(t, c.Set(ctx, "a", []byte("1")))
	base.refuse = errors.New("disk full")
	require.ErrorContains(t, c.Checkpoint(ctx), "disk full")
	require.ErrorContains(t, c.CheckpointError(), "disk full")
	require.NoError(t, c.Set(ctx, "b", []byte("2")), "the journal still takes batches")
	require.Error(t, c.Close(ctx), "the close's checkpoint fails too")
	assert.Empty(t, base.Data())

	base.refuse = nil
	r := reopen(t, base, path)
	assert.Equal(t, 2, r.Records)
	assert.Equal(t, map[string][]byte{"a": []byte("1"), "b": []byte("2")}, base.Data())
}

func TestFailedReplayFailsOpenAndKeepsTheJournal(t *testing.T) {
	ctx := context.Background()
	base, path, c := fresh(t)
	require.NoError(t, c.Set(ctx, "a", []byte("1")))
	require.NoError(t, c.f.Close())
	left := fileSize(t, path)

	base.refuse = errors.New("read-only file system")
	_, _, err := Open(ctx, base, path, Config{})
	require.ErrorContains(t, err, "read-only file system")
	require.ErrorContains(t, err, path)
	assert.Equal(t, left, fileSize(t, path))
}

func TestGetAndWalkSeeTheJournal(t *testing.T) {
	ctx := context.Background()
	base := newBase()
	c, _ := open(t, base, filepath.Join(t.TempDir(), "state.journal"))
	defer func() { require.NoError(t, c.Close(ctx)) }()
	require.NoError(t, c.Set(ctx, "a", []byte("1")))
	v, err := c.Get(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, []byte("1"), v)

	require.NoError(t, c.Set(ctx, "b", []byte("2")))
	seen := map[string]string{}
	require.NoError(t, c.Walk(ctx, func(k string, v []byte) ([]*storage.Operation, error) {
		seen[k] = string(v)
		return nil, nil
	}))
	assert.Equal(t, map[string]string{"a": "1", "b": "2"}, seen)
}

func TestRecordLayout(t *testing.T) {
	// The layout the next version must read: header, then length, CRC-32C
	// and body of each record.
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.journal")
	c, _ := open(t, newBase(), path)
	require.NoError(t, c.Batch(ctx, storage.SetOperation("k", []byte("vv")), storage.DeleteOperation("d")))
	require.NoError(t, c.f.Close())
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	body := []byte{opSet, 1, 'k', 2, 'v', 'v', opDelete, 1, 'd'}
	want := append([]byte("gpbj\x01\x00\x00\x00"), binary.LittleEndian.AppendUint32(nil, uint32(len(body)))...)
	want = binary.LittleEndian.AppendUint32(want, crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)))
	assert.Equal(t, append(want, body...), b)
}

func TestFullDiskFailsTheBatchAndLeavesNoTornRecord(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a size-limited filesystem needs root (mount(2))")
	}
	dir := t.TempDir()
	require.NoError(t, syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=64k,mode=0700"))
	t.Cleanup(func() { assert.NoError(t, syscall.Unmount(dir, syscall.MNT_DETACH)) })
	ctx := context.Background()
	base := newBase()
	path := filepath.Join(dir, "state.journal")
	c, _ := open(t, base, path)
	require.NoError(t, c.Set(ctx, "small", []byte("1")))
	before := fileSize(t, path)

	err := c.Set(ctx, "large", make([]byte, 128<<10))
	require.ErrorIs(t, err, syscall.ENOSPC)
	assert.Equal(t, before, fileSize(t, path), "the torn record is cut off")
	require.NoError(t, c.Set(ctx, "after", []byte("2")), "smaller batches go on")
	require.NoError(t, c.f.Close())

	r := reopen(t, base, path)
	assert.Equal(t, Replay{Records: 2}, r)
	assert.Equal(t, map[string][]byte{"small": []byte("1"), "after": []byte("2")}, base.Data())
}

func TestLargeJournalIsWrittenInChunks(t *testing.T) {
	ctx := context.Background()
	base, path, c := fresh(t)
	c.now = func() time.Time { return c.lastCheckpoint } // no checkpoint by time
	want := map[string][]byte{}
	value := func(i int) []byte {
		v := make([]byte, 1000)
		binary.LittleEndian.PutUint32(v, uint32(i))
		return v
	}
	for i := range 3500 {
		key := fmt.Sprintf("series/%03d", i%500)
		require.NoError(t, c.Set(ctx, key, value(i)))
		want[key] = value(i)
	}
	require.NoError(t, c.Delete(ctx, "series/007"))
	delete(want, "series/007")
	require.Greater(t, fileSize(t, path), int64(3<<20))

	// The second chunk's transaction fails: nothing is lost, the whole
	// journal is written again by the next start.
	base.refuse, base.refuseFrom = errors.New("disk full"), 2
	require.ErrorContains(t, c.Checkpoint(ctx), "disk full")
	assert.Equal(t, 1, base.batches)
	require.NoError(t, c.f.Close())

	base.refuse = nil
	r := reopen(t, base, path)
	assert.Equal(t, 3501, r.Records)
	assert.Equal(t, 1+2, base.batches, "3.5 MB of records over 500 keys: their last values, 0.5 MB, in two transactions of at most 256 KiB")
	assert.Equal(t, want, base.Data())
}

// A state rewritten by every batch (the cumulative state: every series
// moves with every export) reaches the storage once per checkpoint: the
// last value of each key across the whole journal, not of each record.
func TestStateRewrittenByEveryBatchIsWrittenOncePerCheckpoint(t *testing.T) {
	ctx := context.Background()
	base, path, c := fresh(t)
	c.now = func() time.Time { return c.lastCheckpoint } // no checkpoint by time
	want := map[string][]byte{}
	for round := range 40 {
		ops := make([]*storage.Operation, 0, 1000)
		for i := range 1000 {
			v := make([]byte, 100)
			binary.LittleEndian.PutUint32(v, uint32(round))
			key := fmt.Sprintf("series/%016x", i)
			ops = append(ops, storage.SetOperation(key, v))
			want[key] = v
		}
		require.NoError(t, c.Batch(ctx, ops...))
	}
	require.Greater(t, fileSize(t, path), int64(4_000_000))

	require.NoError(t, c.Checkpoint(ctx))
	assert.Equal(t, 1, base.batches, "40 records of the same 1,000 keys (117 KB of keys and values) in one transaction")
	assert.Equal(t, want, base.Data())
}

// A journal with more distinct keys than a checkpoint indexes at once is
// written segment by segment, later segments over earlier ones.
func TestJournalWithManyKeysIsWrittenInSegments(t *testing.T) {
	ctx := context.Background()
	base, _, c := fresh(t)
	c.now = func() time.Time { return c.lastCheckpoint }
	c.maxIndexKeys = 100
	want := map[string][]byte{}
	for i := range 1000 {
		key := fmt.Sprintf("job/%03d", i%250)
		require.NoError(t, c.Set(ctx, key, []byte(fmt.Sprint(i))))
		want[key] = []byte(fmt.Sprint(i))
	}
	require.NoError(t, c.Delete(ctx, "job/001"))
	delete(want, "job/001")

	require.NoError(t, c.Checkpoint(ctx))
	assert.Equal(t, 11, base.batches, "ten segments of 100 records (100 keys each), then the delete")
	assert.Equal(t, want, base.Data())
}

// An indexed journal (IndexAppends) leaves the storage as one read back
// does: each key's last operation, whatever the
// keys, values (some larger than the reading window) and deletions; a
// checkpoint the storage refuses is written whole by the next one, the
// index still holding each key once; past maxIndexKeys keys the journal
// is read back.
func TestIndexedJournalWritesWhatReadingItBackWould(t *testing.T) {
	ctx := context.Background()
	for _, maxKeys := range []int{maxIndexKeys, 50} {
		rng := rand.New(rand.NewPCG(1, uint64(maxKeys)))
		indexed, _, ic := fresh(t)
		ic.IndexAppends()
		read, _, rc := fresh(t)
		for _, c := range []*Client{ic, rc} {
			c.now = func() time.Time { return c.lastCheckpoint } // checkpoints below only
			c.maxIndexKeys = maxKeys
		}
		noted := map[string]bool{} // keys since the last checkpoint written
		for round := range 30 {
			for range 20 {
				var ops []*storage.Operation
				for range 1 + rng.IntN(8) {
					key := fmt.Sprintf("jobs/%04x/%d", rng.IntN(60), rng.IntN(3))
					noted[key] = true
					// A reused key buffer: the journal must not keep it.
					kb := []byte(key)
					k := string(kb)
					if rng.IntN(5) == 0 {
						ops = append(ops, storage.DeleteOperation(k))
						continue
					}
					n := rng.IntN(300)
					if rng.IntN(50) == 0 {
						n = 100<<10 + rng.IntN(1000)
					}
					v := make([]byte, n)
					for i := range v {
						v[i] = byte(rng.Uint32())
					}
					ops = append(ops, storage.SetOperation(k, v))
				}
				for _, c := range []*Client{ic, rc} {
					require.NoError(t, c.Batch(ctx, ops...))
				}
			}
			if !ic.indexFull {
				require.Equal(t, len(noted), ic.index.len(), "round %d: each key indexed once", round)
			}
			if round%7 == 3 {
				indexed.refuse, indexed.refuseFrom = errors.New("refused"), indexed.batches+1
				require.Error(t, ic.Checkpoint(ctx))
				indexed.refuse = nil
				continue
			}
			require.NoError(t, ic.Checkpoint(ctx))
			require.NoError(t, rc.Checkpoint(ctx))
			require.Equal(t, read.Data(), indexed.Data(), "round %d", round)
			clear(noted)
		}
		require.NoError(t, ic.Checkpoint(ctx))
		require.NoError(t, rc.Checkpoint(ctx))
		assert.Equal(t, read.Data(), indexed.Data())
		assert.NotEmpty(t, indexed.Data())
	}
}
