// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derivestate

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"

	"github.com/gpubuild/otelcol-gpubuild/internal/buildjob/runmemory"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/storagetest"
)

func testStore(client storage.Client) *Store {
	return newStore(client, DefaultConfig(), "test", zap.NewNop())
}

// Both fixtures load whole: the counts not yet flushed, the three runs,
// the start of the cumulative series. The jobs of the earlier key layout
// are to be rewritten under ordered keys, their old entries are deleted.
func TestFixturesLoad(t *testing.T) {
	for _, path := range []string{fixturePath, fixtureByIDPath} {
		t.Run(filepath.Base(path), func(t *testing.T) {
			client := storagetest.NewClient(loadFixtureFile(t, path))
			s := testStore(client)
			snap, err := s.Load(context.Background(), fixtureLayout, fixtureTime.Add(time.Minute))
			require.NoError(t, err)

			assert.Equal(t, [NumSkipReasons]int64{}, snap.Skipped)
			assert.NotZero(t, snap.Start)
			require.Len(t, snap.Series, 1)
			assert.Equal(t, int64(2), snap.Series[0].Count)
			assert.Contains(t, snap.Resources, snap.Series[0].Resource)
			byID := strings.Contains(path, "by_id")
			var ids []string
			var bytes int64
			for _, j := range snap.Jobs {
				ids = append(ids, j.Key.JobID)
				require.Len(t, j.Runs, 1)
				assert.Contains(t, snap.Resources, j.Runs[0].Resource)
				assert.Equal(t, byID, j.Rewrite, j.Key.JobID)
				if byID {
					assert.Zero(t, j.Stored, "written anew under an ordered key")
					continue
				}
				v := client.Value(JobKey(j.Stored.Seq, j.Key))
				require.NotNil(t, v, j.Key.JobID)
				assert.Equal(t, len(v), j.Stored.Bytes)
				bytes += int64(len(v))
			}
			assert.ElementsMatch(t, []string{"job-7", "job-8", "job-9"}, ids)
			assert.Equal(t, bytes, s.JobBytes())
			for k := range client.Data() {
				assert.False(t, strings.HasPrefix(k, KeyJobPrefixByID), "%q is deleted once read", k)
			}
		})
	}
}

// A run not updated for job_timeout plus state.expiry_margin is not
// restored, and a job left without runs loses its entry; the counts stay.
func TestRunsPastTimeoutAndMarginExpire(t *testing.T) {
	client := storagetest.NewClient(loadFixtureFile(t, fixturePath))
	s := testStore(client)
	now := fixtureTime.Add(fixtureLayout.JobTimeout + DefaultConfig().ExpiryMargin + time.Minute)
	snap, err := s.Load(context.Background(), fixtureLayout, now)
	require.NoError(t, err)
	assert.Empty(t, snap.Jobs)
	require.Len(t, snap.Series, 1)
	for k := range client.Data() {
		assert.False(t, strings.HasPrefix(k, KeyJobPrefix), "%q is deleted", k)
	}
	assert.Zero(t, s.JobBytes())
}

// A derivation without run memory (the processor's) leaves job entries
// alone.
func TestLoadWithoutRunsLeavesJobEntries(t *testing.T) {
	entries := loadFixtureFile(t, fixturePath)
	client := storagetest.NewClient(loadFixtureFile(t, fixturePath))
	l := fixtureLayout
	l.Runs = false
	snap, err := testStore(client).Load(context.Background(), l, fixtureTime)
	require.NoError(t, err)
	assert.Empty(t, snap.Jobs)
	assert.Len(t, snap.Series, 1)
	for k, v := range entries {
		if strings.HasPrefix(k, KeyJobPrefix) {
			assert.Equal(t, v, client.Value(k))
		}
	}
}

func testRun(res string, listed time.Time) Run {
	return Run{State: runmemory.Ended, Start: 1, End: 2, Result: "success", ListedAt: listed, Resource: res, Dims: []Dim{}}
}

// What one batch writes is what the next start reads: jobs in the order
// they were first written, their size accounted; a job deleted once
// without runs; each resource written once.
func TestWrittenStateLoadsBack(t *testing.T) {
	ctx := context.Background()
	client := storagetest.NewClient(nil)
	s := testStore(client)
	attrs := pcommon.NewMap()
	attrs.PutStr("service.name", "svc")
	var ref ResourceRef
	now := time.Unix(0, time.Now().UnixNano())

	var a, b runmemory.StoredEntry
	var seriesKey string
	s.Begin()
	res := s.Resource(&ref, attrs)
	s.PutJob(&a, runmemory.Key{Service: "svc", JobID: "a"}, []Run{testRun(res, now)})
	s.PutJob(&b, runmemory.Key{Service: "svc", JobID: "b"}, []Run{testRun(res, now), testRun(s.Resource(&ref, attrs), now)})
	s.PutSeries(&seriesKey, &Series{A: "success", Resource: res, Count: 3})
	s.PutMeta(pcommon.NewTimestampFromTime(now))
	require.NoError(t, s.Commit(ctx))
	assert.Equal(t, uint64(1), a.Seq)
	assert.Equal(t, uint64(2), b.Seq)
	assert.Equal(t, int64(a.Bytes+b.Bytes), s.JobBytes())
	assert.Equal(t, SeriesKey(1), seriesKey)
	assert.Len(t, client.Data(), 5, "meta, one resource, two jobs, one series")

	s.Begin()
	s.DeleteJob(&a, runmemory.Key{Service: "svc", JobID: "a"})
	require.NoError(t, s.Commit(ctx))
	assert.Zero(t, a)
	assert.Equal(t, int64(b.Bytes), s.JobBytes())
	assert.Nil(t, client.Value(JobKey(1, runmemory.Key{Service: "svc", JobID: "a"})))

	next := testStore(client)
	snap, err := next.Load(ctx, Layout{Buckets: []int{1}, Runs: true, JobTimeout: time.Hour}, now)
	require.NoError(t, err)
	assert.Equal(t, pcommon.NewTimestampFromTime(now), snap.Start)
	require.Len(t, snap.Jobs, 1)
	assert.Equal(t, runmemory.Key{Service: "svc", JobID: "b"}, snap.Jobs[0].Key)
	assert.Equal(t, b, snap.Jobs[0].Stored)
	assert.Equal(t, []Run{testRun(res, now), testRun(res, now)}, snap.Jobs[0].Runs)
	require.Len(t, snap.Series, 1)
	assert.Equal(t, int64(3), snap.Series[0].Count)
	assert.True(t, attrs.Equal(snap.Resources[res]))

	// A new job takes the next place in the key order; the resource read
	// back is not written again.
	var c runmemory.StoredEntry
	next.Begin()
	next.PutJob(&c, runmemory.Key{Service: "svc", JobID: "c"}, []Run{testRun(next.Resource(&ResourceRef{}, attrs), now)})
	assert.Len(t, next.ops, 1)
	require.NoError(t, next.Commit(ctx))
	assert.Equal(t, uint64(3), c.Seq)
}

// failingClient refuses its next batch when fail is set.
type failingClient struct {
	*storagetest.Client
	fail bool
}

func (c *failingClient) Batch(ctx context.Context, ops ...*storage.Operation) error {
	if c.fail {
		c.fail = false
		return errors.New("disk full")
	}
	return c.Client.Batch(ctx, ops...)
}

// A failed batch is written whole by the next one: the resources it held
// and the deletions queued for it.
func TestFailedBatchIsWrittenByTheNext(t *testing.T) {
	ctx := context.Background()
	client := &failingClient{Client: storagetest.NewClient(map[string][]byte{SeriesKey(7): {FormatV1}})}
	s := testStore(client)
	attrs := pcommon.NewMap()
	attrs.PutStr("service.name", "svc")
	var ref ResourceRef
	var key string

	client.fail = true
	s.QueueDelete(SeriesKey(7))
	s.Begin()
	s.PutSeries(&key, &Series{A: "success", Resource: s.Resource(&ref, attrs), Count: 1})
	require.Error(t, s.Commit(ctx))
	assert.Len(t, client.Data(), 1, "nothing written")

	s.Begin()
	s.PutSeries(&key, &Series{A: "success", Resource: s.Resource(&ref, attrs), Count: 2})
	require.NoError(t, s.Commit(ctx))
	assert.Nil(t, client.Value(SeriesKey(7)))
	assert.NotNil(t, client.Value(ref.key), "the resource is written with the retry")
	sr, err := DecodeSeries(client.Value(key), &Layout{Buckets: []int{1}})
	require.NoError(t, err)
	assert.Equal(t, int64(2), sr.Count)
}
