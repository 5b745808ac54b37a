// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derive

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gpubuild/otelcol-gpubuild/internal/buildjob/derivestate"
	"github.com/gpubuild/otelcol-gpubuild/internal/state/journal"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/storagetest"
)

var updateFixtures = flag.Bool("update", false, "rewrite ../derivestate/testdata/state_v1.txt from this version's encoder")

var stateStorageID = component.MustNewIDWithName("file_storage", "state")

// storageHost hands out one storage extension, as the collector's host does.
type storageHost struct {
	component.Host
	ext extension.Extension
}

func (h storageHost) GetExtensions() map[component.ID]component.Component {
	return map[component.ID]component.Component{stateStorageID: h.ext}
}

// startFileStorage starts the real file_storage extension over dir.
func startFileStorage(t *testing.T, dir string) extension.Extension {
	return startFileStorageSync(t, dir, false)
}

// startFileStorageSync starts file_storage with its fsync setting.
func startFileStorageSync(t *testing.T, dir string, fsync bool) extension.Extension {
	t.Helper()
	return storagetest.FileStorage(t, dir, fsync)
}

// sidecar is one collector process's connector over a state directory.
type sidecar struct {
	t    *testing.T
	ext  extension.Extension
	pair connectorPair
	conn *testConnector
	tel  *componenttest.Telemetry
	logs *observer.ObservedLogs
}

// startSidecar starts a connector with its state in dir. clock, when set,
// is the connector's clock.
func startSidecar(t *testing.T, dir string, cfg *jobSettings, next consumer.Metrics, clock func() time.Time) *sidecar {
	t.Helper()
	return startSidecarSync(t, dir, false, cfg, next, clock)
}

func startSidecarSync(t *testing.T, dir string, fsync bool, cfg *jobSettings, next consumer.Metrics, clock func() time.Time) *sidecar {
	t.Helper()
	ctx := context.Background()
	if cfg == nil {
		cfg = testConfig()
	}
	cfg.State.Storage = &stateStorageID
	s := &sidecar{t: t, ext: startFileStorageSync(t, dir, fsync), tel: componenttest.NewTelemetry()}
	t.Cleanup(func() { _ = s.tel.Shutdown(ctx) })
	set := connectortest.NewNopSettings(testType)
	set.ID = component.NewID(testType)
	set.TelemetrySettings = s.tel.NewTelemetrySettings()
	core, logs := observer.New(zapcore.InfoLevel)
	set.Logger = zap.New(core)
	s.logs = logs
	f := testConnectorFactory()
	tc, err := f.CreateTracesToMetrics(ctx, set, cfg, next)
	require.NoError(t, err)
	lc, err := f.CreateLogsToMetrics(ctx, set, cfg, next)
	require.NoError(t, err)
	s.pair = connectorPair{traces: tc, logs: lc, tel: s.tel}
	s.conn = tc.(*tracesConnector).shared
	if clock != nil {
		s.conn.emitter.now = clock
	}
	host := storageHost{Host: componenttest.NewNopHost(), ext: s.ext}
	require.NoError(t, tc.Start(ctx, host))
	require.NoError(t, lc.Start(ctx, host))
	return s
}

// sigterm shuts the connector down (final flush) and then the storage.
func (s *sidecar) sigterm() error {
	ctx := context.Background()
	err := s.pair.traces.Shutdown(ctx)
	if err2 := s.pair.logs.Shutdown(ctx); err == nil {
		err = err2
	}
	require.NoError(s.t, s.ext.Shutdown(ctx))
	return err
}

// kill9 stops the connector without a flush, as a killed process does:
// what was written to the storage or the journal stays, nothing else
// happens.
func (s *sidecar) kill9() {
	e := s.conn.emitter
	e.stopLoop()
	<-e.loopDone
	closeAsKilled(s.t, s.conn.state)
	require.NoError(s.t, s.ext.Shutdown(context.Background()))
}

// closeAsKilled closes the state's storage client as a killed process
// leaves it: a journal is not written into the storage.
func closeAsKilled(t *testing.T, st *derivationState) {
	t.Helper()
	if j := st.store.Journal(); j != nil {
		require.NoError(t, j.Storage().Close(context.Background()))
		return
	}
	require.NoError(t, st.store.Close(context.Background()))
}

// stateModes runs a lifecycle test with each request's batch written to
// the storage, and with the journal in front of it (config returns a fresh
// configuration of the mode; journal says which).
func stateModes(t *testing.T, test func(t *testing.T, config func() *jobSettings, journal bool)) {
	t.Run("storage", func(t *testing.T) { test(t, testConfig, false) })
	t.Run("journal", func(t *testing.T) {
		dir := t.TempDir()
		test(t, func() *jobSettings {
			cfg := testConfig()
			cfg.State.Journal.Directory = dir
			return cfg
		}, true)
	})
}

// seriesEntries counts the derived series entries the storage in dir holds.
func seriesEntries(t *testing.T, dir string) int {
	n := 0
	for k := range readEntries(t, dir) {
		if strings.HasPrefix(k, derivestate.KeySeriesPrefix) {
			n++
		}
	}
	return n
}

func (s *sidecar) consumeTraces(svc *testService) {
	require.NoError(s.t, s.pair.traces.ConsumeTraces(context.Background(), svc.traces()))
}

func (s *sidecar) consumeLogs(svc *testService) {
	require.NoError(s.t, s.pair.logs.ConsumeLogs(context.Background(), svc.logs()))
}

// landed sums a derived metric over everything the sinks accepted.
func landed(metric string, want map[string]string, sinks ...*consumertest.MetricsSink) int64 {
	var n int64
	for _, sink := range sinks {
		for _, md := range sink.AllMetrics() {
			n += total(points(md), metric, want)
		}
	}
	return n
}

var success = attrs("build.result", "success")

// kill -9 after runs were counted and before the flush: the next process
// emits them, once.
func TestStateKill9KeepsCountsNotYetFlushed(t *testing.T) {
	stateModes(t, testStateKill9KeepsCountsNotYetFlushed)
}

func testStateKill9KeepsCountsNotYetFlushed(t *testing.T, config func() *jobSettings, journal bool) {
	dir := t.TempDir()
	svc := newTestService(t, newOTLPSink(t))
	now := time.Now()

	first := new(consumertest.MetricsSink)
	a := startSidecar(t, dir, config(), first, nil)
	ranJob(svc, "job-1", now)
	a.consumeLogs(svc)
	svc.request("POST", "/_build", 202, now.Add(-time.Second), now)
	a.consumeTraces(svc)
	a.kill9()
	assert.Empty(t, first.AllMetrics())
	if journal {
		assert.Zero(t, seriesEntries(t, dir), "the counts are in the journal only: no checkpoint ran")
	} else {
		assert.Positive(t, seriesEntries(t, dir))
	}

	second := new(consumertest.MetricsSink)
	b := startSidecar(t, dir, config(), second, nil)
	// The run's span arrives after the restart (it was in the SDK's batch).
	svc.jobSpan("job-1", now.Add(-time.Minute), now, codes.Ok)
	b.consumeTraces(svc)
	assertCounter(t, b.tel, "otelcol_buildjob_records_deduplicated", []metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())
	require.NoError(t, b.sigterm())

	assert.Equal(t, int64(1), landed(metricBuildJobs, success, first, second))
	assert.Equal(t, int64(1), landed(metricAPIRequests, nil, first, second))
	p := one(t, points(second.AllMetrics()[0]), metricBuildJobDuration, success)
	assert.Equal(t, uint64(1), p.count)
}

// SIGTERM: the final flush emits what was counted; the run memory stays,
// so the run's span delivered after the restart is not counted again, and
// an end whose start had not arrived waits for it instead of being counted
// without a duration.
func TestStateSIGTERMRemembersRunsAcrossRestart(t *testing.T) {
	stateModes(t, testStateSIGTERMRemembersRunsAcrossRestart)
}

func testStateSIGTERMRemembersRunsAcrossRestart(t *testing.T, config func() *jobSettings, _ bool) {
	dir := t.TempDir()
	svc := newTestService(t, newOTLPSink(t))
	now := time.Now()

	first := new(consumertest.MetricsSink)
	a := startSidecar(t, dir, config(), first, nil)
	ranJob(svc, "job-1", now)
	svc.status("job-2", completed, now) // its start is still in the SDK's batch
	a.consumeLogs(svc)
	require.NoError(t, a.sigterm())
	assert.Equal(t, int64(1), landed(metricBuildJobs, success, first))

	second := new(consumertest.MetricsSink)
	b := startSidecar(t, dir, config(), second, nil)
	svc.jobSpan("job-1", now.Add(-time.Minute), now, codes.Ok)
	b.consumeTraces(svc)
	svc.status("job-2", running, now.Add(-30*time.Second))
	b.consumeLogs(svc)
	require.NoError(t, b.sigterm())

	assert.Equal(t, int64(2), landed(metricBuildJobs, success, first, second))
	p := one(t, points(second.AllMetrics()[0]), metricBuildJobDuration, success)
	assert.Equal(t, uint64(1), p.count, "job-2 counted with its duration")
	assert.InDelta(t, 30.0, p.sum, 1e-9)

	// A third start has nothing left to emit.
	third := new(consumertest.MetricsSink)
	c := startSidecar(t, dir, config(), third, nil)
	require.NoError(t, c.sigterm())
	assert.Empty(t, third.AllMetrics())
}

// SIGTERM writes the journal into the storage: a next start without the
// journal (turned off, or a release before it) restores everything from
// the storage alone.
func TestStateJournalTurnedOffAfterSIGTERMLosesNothing(t *testing.T) {
	dir := t.TempDir()
	svc := newTestService(t, newOTLPSink(t))
	now := time.Now()
	withJournal := testConfig()
	withJournal.State.Journal.Directory = dir

	first := new(consumertest.MetricsSink)
	a := startSidecar(t, dir, withJournal, first, nil)
	ranJob(svc, "job-1", now)
	svc.status("job-2", completed, now) // its start is still in the SDK's batch
	a.consumeLogs(svc)
	require.NoError(t, a.sigterm())
	journal, err := os.ReadFile(filepath.Join(dir, journal.FileName(component.KindConnector, component.NewID(testType), derivestate.ClientName)))
	require.NoError(t, err)
	assert.Equal(t, 8, len(journal), "the journal holds its header only")

	second := new(consumertest.MetricsSink)
	b := startSidecar(t, dir, nil, second, nil)
	svc.jobSpan("job-1", now.Add(-time.Minute), now, codes.Ok)
	b.consumeTraces(svc)
	svc.status("job-2", running, now.Add(-30*time.Second))
	b.consumeLogs(svc)
	require.NoError(t, b.sigterm())
	assert.Equal(t, int64(2), landed(metricBuildJobs, success, first, second), "job-1 once, job-2 once")
}

// A flush the next consumer accepted is deleted from the state: a kill
// right after it does not emit it again.
func TestStateAcceptedFlushIsNotRepeated(t *testing.T) {
	stateModes(t, testStateAcceptedFlushIsNotRepeated)
}

func testStateAcceptedFlushIsNotRepeated(t *testing.T, config func() *jobSettings, _ bool) {
	dir := t.TempDir()
	svc := newTestService(t, newOTLPSink(t))
	now := time.Now()

	first := new(consumertest.MetricsSink)
	a := startSidecar(t, dir, config(), first, nil)
	ranJob(svc, "job-1", now)
	a.consumeLogs(svc)
	require.NoError(t, a.conn.emitter.flush(context.Background()))
	a.kill9()

	second := new(consumertest.MetricsSink)
	b := startSidecar(t, dir, config(), second, nil)
	require.NoError(t, b.sigterm())
	assert.Equal(t, int64(1), landed(metricBuildJobs, success, first, second))
}

// A refused flush is carried over in memory and on disk; a final flush that
// is still refused leaves the counts for the next start instead of losing
// them.
func TestStateRefusedFinalFlushStaysForNextStart(t *testing.T) {
	stateModes(t, testStateRefusedFinalFlushStaysForNextStart)
}

func testStateRefusedFinalFlushStaysForNextStart(t *testing.T, config func() *jobSettings, _ bool) {
	dir := t.TempDir()
	svc := newTestService(t, newOTLPSink(t))
	now := time.Now()
	cfg := config()
	cfg.MetricsFlushInterval = 200 * time.Millisecond

	a := startSidecar(t, dir, cfg, &refuseAlways{}, nil)
	ranJob(svc, "job-1", now)
	a.consumeLogs(svc)
	require.Error(t, a.conn.emitter.flush(context.Background()))
	ranJob(svc, "job-2", now)
	a.consumeLogs(svc)
	require.Error(t, a.sigterm())

	second := new(consumertest.MetricsSink)
	b := startSidecar(t, dir, config(), second, nil)
	require.NoError(t, b.sigterm())
	assert.Equal(t, int64(2), landed(metricBuildJobs, success, second))
}

// Over state.max_bytes, the oldest counted runs are forgotten, counted and
// logged; the counts themselves are kept.
func TestStateByteBudgetEvictsOldestEndedRuns(t *testing.T) {
	dir := t.TempDir()
	svc := newTestService(t, newOTLPSink(t))
	now := time.Now()
	cfg := testConfig()
	cfg.State.MaxBytes = 600

	sink := new(consumertest.MetricsSink)
	a := startSidecar(t, dir, cfg, sink, nil)
	for i := range 20 {
		id := fmt.Sprintf("job-%d", i)
		svc.status(id, running, now.Add(-time.Minute))
		svc.status(id, completed, now)
		a.consumeLogs(svc)
	}
	assert.LessOrEqual(t, a.conn.state.store.JobBytes(), int64(600))
	got, err := a.tel.GetMetric("otelcol_buildjob_state_runs_evicted")
	require.NoError(t, err)
	evicted := got.Data.(metricdata.Sum[int64]).DataPoints[0].Value
	assert.Positive(t, evicted)
	assert.Less(t, evicted, int64(20))
	assert.Equal(t, 1, a.logs.FilterMessageSnippet("state.max_bytes").Len(), "one rate-limited warning")
	require.NoError(t, a.sigterm())
	assert.Equal(t, int64(20), landed(metricBuildJobs, success, sink))
}

// fixtureTime is when the runs of the fixture (fixturePath) were counted.
var fixtureTime = time.Date(2026, time.March, 2, 10, 0, 0, 0, time.UTC)

// fixturePath is the state this version writes; fixtureByIDPath the same
// state as versions before the ordered job keys wrote it.
const (
	fixturePath     = "../derivestate/testdata/state_v1.txt"
	fixtureByIDPath = "../derivestate/testdata/state_v1_job_keys_by_id.txt"
)

// With fsync on the extension (the power-loss option) every batch is synced
// before the request is acknowledged; the state reads back the same.
func TestStateWithFsync(t *testing.T) {
	dir := t.TempDir()
	svc := newTestService(t, newOTLPSink(t))
	now := time.Now()
	first := new(consumertest.MetricsSink)
	a := startSidecarSync(t, dir, true, nil, first, nil)
	ranJob(svc, "job-1", now)
	a.consumeLogs(svc)
	a.kill9()
	second := new(consumertest.MetricsSink)
	b := startSidecarSync(t, dir, true, nil, second, nil)
	require.NoError(t, b.sigterm())
	assert.Equal(t, int64(1), landed(metricBuildJobs, success, first, second))
}

// Disk loss: the state directory is gone. The collector starts empty, the
// unflushed counts are lost, and a run counted before whose span arrives
// later counts again, as docs/guarantees.md says.
func TestStateDiskLossStartsEmpty(t *testing.T) {
	dir := t.TempDir()
	svc := newTestService(t, newOTLPSink(t))
	now := time.Now()
	first := new(consumertest.MetricsSink)
	a := startSidecar(t, dir, nil, first, nil)
	ranJob(svc, "job-1", now)
	ranJob(svc, "job-2", now)
	a.consumeLogs(svc)
	require.NoError(t, a.conn.emitter.flush(context.Background()))
	ranJob(svc, "job-3", now)
	a.consumeLogs(svc)
	a.kill9()
	require.NoError(t, os.RemoveAll(dir))
	require.NoError(t, os.Mkdir(dir, 0o700))

	second := new(consumertest.MetricsSink)
	b := startSidecar(t, dir, nil, second, nil)
	svc.jobSpan("job-1", now.Add(-time.Minute), now, codes.Ok)
	b.consumeTraces(svc)
	require.NoError(t, b.sigterm())
	assert.Equal(t, int64(2), landed(metricBuildJobs, success, first), "job-1 and job-2 flushed before the loss")
	assert.Equal(t, int64(1), landed(metricBuildJobs, success, second), "job-3's count is lost; job-1 counts again")
}

// ranJob reports a run of id that started a minute before end and succeeded.
func ranJob(svc *testService, id string, end time.Time) {
	svc.status(id, running, end.Add(-time.Minute))
	svc.status(id, completed, end)
}

// Two persisted entries of the same series (a flush taken and not yet
// accepted, and the counts derived meanwhile) are merged at start; the
// merge is written with the next batch, so a second crash after it still
// holds their sum.
func TestStateMergedSeriesSurviveASecondCrash(t *testing.T) {
	dir := t.TempDir()
	svc := newTestService(t, newOTLPSink(t))
	now := time.Now()
	a := startSidecar(t, dir, nil, new(consumertest.MetricsSink), nil)
	ranJob(svc, "job-1", now)
	a.consumeLogs(svc)
	require.NotNil(t, a.conn.emitter.take(context.Background(), false), "a flush in flight")
	ranJob(svc, "job-2", now)
	a.consumeLogs(svc)
	a.kill9()
	require.Equal(t, 2, seriesEntries(t, dir), "two entries of the build.jobs success series")

	b := startSidecar(t, dir, nil, new(consumertest.MetricsSink), nil)
	svc.request("GET", "/_status/{job_id}", 200, now.Add(-time.Second), now)
	b.consumeTraces(svc) // a batch after the start writes the merge
	b.kill9()

	sink := new(consumertest.MetricsSink)
	c := startSidecar(t, dir, nil, sink, nil)
	require.NoError(t, c.sigterm())
	assert.Equal(t, int64(2), landed(metricBuildJobs, success, sink))
	assert.Equal(t, int64(1), landed(metricAPIRequests, nil, sink))
}
