// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derive

import (
	"context"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap/zapcore"

	"github.com/gpubuild/otelcol-gpubuild/internal/buildjob/derivestate"
	"github.com/gpubuild/otelcol-gpubuild/internal/buildjob/runmemory"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/storagetest"
)

// writeFixtureState derives the fixture's content through this version:
// job-7 and job-8 counted as successes (not yet flushed), job-9 active.
func writeFixtureState(t *testing.T, dir string) {
	clock := func() time.Time { return fixtureTime }
	svc := newTestService(t, newOTLPSink(t), attribute.String("service.name", "vector-index-build"))
	a := startSidecar(t, dir, nil, new(consumertest.MetricsSink), clock)
	svc.status("job-7", running, fixtureTime.Add(-2*time.Minute))
	svc.status("job-7", completed, fixtureTime.Add(-time.Minute))
	svc.status("job-8", running, fixtureTime.Add(-2*time.Minute))
	svc.status("job-8", completed, fixtureTime.Add(-30*time.Second))
	svc.status("job-9", running, fixtureTime.Add(-10*time.Second))
	a.consumeLogs(svc)
	a.kill9()
}

// withStateClient opens the connector's client of a file_storage over dir,
// as the connector does, for f.
func withStateClient(t *testing.T, dir string, f func(storage.Client)) {
	ext := startFileStorage(t, dir)
	defer func() { require.NoError(t, ext.Shutdown(context.Background())) }()
	client, err := ext.(storage.Extension).GetClient(context.Background(), component.KindConnector, component.NewID(testType), derivestate.ClientName)
	require.NoError(t, err)
	defer func() { require.NoError(t, client.Close(context.Background())) }()
	f(client)
}

// readEntries lists the entries of the connector's state in dir.
func readEntries(t *testing.T, dir string) map[string][]byte {
	out := map[string][]byte{}
	withStateClient(t, dir, func(client storage.Client) {
		require.NoError(t, client.(storage.Walker).Walk(context.Background(), func(k string, v []byte) ([]*storage.Operation, error) {
			out[k] = slices.Clone(v)
			return nil, nil
		}))
	})
	return out
}

// writeEntries sets entries in the connector's state in dir.
func writeEntries(t *testing.T, dir string, entries map[string][]byte) {
	withStateClient(t, dir, func(client storage.Client) {
		for k, v := range entries {
			require.NoError(t, client.Set(context.Background(), k, v))
		}
	})
}

func loadFixture(t testing.TB) map[string][]byte { return loadFixtureFile(t, fixturePath) }

func loadFixtureFile(t testing.TB, path string) map[string][]byte {
	entries, err := storagetest.ReadEntries(path)
	require.NoError(t, err)
	return entries
}

// The fixture pins format 1: this version writes exactly its bytes for the
// same input (run with -update to rewrite it after a deliberate change,
// which must then take a new format byte).
func TestStateFormatOneIsWhatThisVersionWrites(t *testing.T) {
	dir := t.TempDir()
	writeFixtureState(t, dir)
	got := readEntries(t, dir)
	if *updateFixtures {
		keys := slices.Sorted(maps.Keys(got))
		var b strings.Builder
		b.WriteString("# Persisted derivation state, format 1 (see README.md): one entry per line,\n# the Go-quoted key, a space, the value in hex. Written by writeFixtureState.\n")
		for _, k := range keys {
			fmt.Fprintf(&b, "%s %s\n", strconv.Quote(k), hex.EncodeToString(got[k]))
		}
		require.NoError(t, os.MkdirAll(filepath.Dir(fixturePath), 0o755))
		require.NoError(t, os.WriteFile(fixturePath, []byte(b.String()), 0o644))
	}
	assert.Equal(t, loadFixture(t), got)
}

// A state written in format 1 is read back: the counts not yet flushed are
// emitted once, the counted runs are remembered, the active run goes on;
// likewise from a state of the versions that keyed jobs by id, whose job
// entries are rewritten under ordered keys.
func TestStateFormatOneFixtureIsRestored(t *testing.T) {
	for _, path := range []string{fixturePath, fixtureByIDPath} {
		t.Run(filepath.Base(path), func(t *testing.T) { testFixtureIsRestored(t, path) })
	}
}

func testFixtureIsRestored(t *testing.T, path string) {
	dir := t.TempDir()
	writeEntries(t, dir, loadFixtureFile(t, path))
	clock := func() time.Time { return fixtureTime.Add(time.Minute) }
	svc := newTestService(t, newOTLPSink(t), attribute.String("service.name", "vector-index-build"))
	sink := new(consumertest.MetricsSink)
	s := startSidecar(t, dir, nil, sink, clock)
	svc.jobSpan("job-7", fixtureTime.Add(-2*time.Minute), fixtureTime.Add(-time.Minute), codes.Ok)
	s.consumeTraces(svc)
	svc.status("job-9", completed, fixtureTime.Add(50*time.Second))
	s.consumeLogs(svc)
	assertCounter(t, s.tel, "otelcol_buildjob_records_deduplicated", []metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())
	require.NoError(t, s.sigterm())

	ps := points(sink.AllMetrics()[0])
	assert.Equal(t, int64(3), total(ps, metricBuildJobs, success), "job-7 and job-8 from the state, job-9 now")
	d := one(t, ps, metricBuildJobDuration, success)
	assert.InDelta(t, 60.0+90.0+60.0, d.sum, 1e-9)

	var jobKeys []string
	for k := range readEntries(t, dir) {
		if strings.HasPrefix(k, derivestate.KeyJobPrefixByID) {
			t.Errorf("entry %q is left under the earlier key layout", k)
		}
		if strings.HasPrefix(k, derivestate.KeyJobPrefix) {
			jobKeys = append(jobKeys, k)
		}
	}
	assert.Len(t, jobKeys, 3, "job-7, job-8 and job-9 are remembered")
}

// Damaged entries (an unknown format byte, a truncated value, garbage, a
// series and a run whose resource is gone) are skipped with a counted reason and a
// warning naming the storage file and the key; the rest is restored and
// nothing is counted twice.
func TestStateDamagedEntriesAreSkipped(t *testing.T) {
	dir := t.TempDir()
	entries := loadFixture(t)
	var job7, seriesKey, resKey string
	for k := range entries {
		switch {
		case strings.HasSuffix(k, "\x00job-7"):
			job7 = k
		case strings.HasPrefix(k, derivestate.KeySeriesPrefix):
			seriesKey = k
		case strings.HasPrefix(k, derivestate.KeyResPrefix):
			resKey = k
		}
	}
	require.NotEmpty(t, job7)
	require.NotEmpty(t, seriesKey)
	future := slices.Clone(entries[job7])
	future[0] = 9
	entries[job7] = future                                              // unknown version
	entries[seriesKey] = entries[seriesKey][:len(entries[seriesKey])-3] // truncated
	entries["job/vector-index-build\x00job-x"] = []byte{1, 0xff, 0xff}
	orphan := derivestate.EncodeSeries(nil, &derivestate.Series{Family: uint8(familyJobs), A: "success", Resource: "res/00000000000000ff", Count: 5})
	entries[derivestate.SeriesKey(99)] = orphan
	orphanRun := derivestate.Run{State: runmemory.Ended, Start: 1, End: 2, Result: resultSuccess, ListedAt: fixtureTime, Resource: "res/00000000000000ff"}
	entries[derivestate.JobKey(99, runmemory.Key{Service: "vector-index-build", JobID: "job-y"})] = derivestate.EncodeJob(nil, []derivestate.Run{orphanRun})
	writeEntries(t, dir, entries)
	require.Contains(t, entries, resKey)

	clock := func() time.Time { return fixtureTime.Add(time.Minute) }
	sink := new(consumertest.MetricsSink)
	s := startSidecar(t, dir, nil, sink, clock)

	warnings := s.logs.FilterLevelExact(zapcore.WarnLevel).All()
	require.Len(t, warnings, 5)
	for _, w := range warnings {
		assert.Contains(t, w.ContextMap()["storage"], "connector_buildjob__derivation")
		assert.NotEmpty(t, w.ContextMap()["key"])
	}
	assertCounter(t, s.tel, "otelcol_buildjob_state_entries_skipped", []metricdata.DataPoint[int64]{
		{Value: 1, Attributes: attribute.NewSet(attribute.String("reason", "unknown_version"))},
		{Value: 2, Attributes: attribute.NewSet(attribute.String("reason", "corrupted"))},
		{Value: 2, Attributes: attribute.NewSet(attribute.String("reason", "missing_resource"))},
	}, metricdatatest.IgnoreTimestamp())
	require.NoError(t, s.sigterm())
	// The damaged series held job-7's and job-8's count: lost, not doubled;
	// the orphan's 5 are not invented; job-9 is still active.
	require.Len(t, sink.AllMetrics(), 1)
	ps := points(sink.AllMetrics()[0])
	assert.Empty(t, matching(ps, metricBuildJobs, nil))
	assert.Equal(t, int64(1), one(t, ps, metricBuildJobsActive, nil).value)
}

// Runs restored at start share their dimension tuples as runs seen live
// do, and a later record that fills a dimension of one restored run leaves
// its neighbours' tuple alone: each is counted with its own dimensions.
func TestRestoredRunsShareDimensions(t *testing.T) {
	dir := t.TempDir()
	svc := newTestService(t, newOTLPSink(t))
	now := time.Now()
	config := func() *jobSettings {
		cfg := testConfig()
		cfg.Dimensions = []string{"build.engine", "build.data_type"}
		return cfg
	}

	a := startSidecar(t, dir, config(), new(consumertest.MetricsSink), nil)
	for _, job := range []string{"job-1", "job-2", "job-3"} {
		svc.status(job, running, now.Add(-time.Minute), attribute.String("build.engine", "cagra"))
	}
	a.consumeLogs(svc)
	require.NoError(t, a.sigterm())

	next := new(consumertest.MetricsSink)
	b := startSidecar(t, dir, config(), next, nil)
	var tuples [][]dimValue
	b.conn.emitter.d.jobs.ForEachActive(func(p runPayload) { tuples = append(tuples, p.dims) })
	require.Len(t, tuples, 3)
	for _, dims := range tuples {
		require.Len(t, dims, 2)
		assert.Same(t, &tuples[0][0], &dims[0], "one copy of the restored tuple")
	}

	svc.status("job-1", completed, now, attribute.String("build.engine", "cagra"), attribute.String("build.data_type", "float16"))
	svc.status("job-2", completed, now, attribute.String("build.engine", "cagra"))
	b.consumeLogs(svc)
	require.NoError(t, b.sigterm())
	ps := points(next.AllMetrics()[0])
	assert.Equal(t, int64(1), one(t, ps, metricBuildJobs, attrs("build.result", "success", "build.engine", "cagra", "build.data_type", "float16")).value)
	assert.Equal(t, int64(1), one(t, ps, metricBuildJobs, attrs("build.result", "success", "build.engine", "cagra")).value, "job-2 kept its tuple")
}
