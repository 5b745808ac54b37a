// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/metadata"
	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/metadatatest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
)

var queueStorageID = component.MustNewIDWithName("file_storage", "queue")

// queuedExporter is one collector process: an exporter whose sending queue
// is in a real file_storage over dir, and the logs it wrote.
type queuedExporter struct {
	*testExporter
	storage extension.Extension
	logs    *observer.ObservedLogs
}

// startQueuedExporter starts an exporter with a persistent sending queue in
// dir (a new file_storage over the same dir is what a restart sees).
func startQueuedExporter(t *testing.T, server *cloudwatchtest.Server, dir string, tweak func(*Config)) *queuedExporter {
	t.Helper()
	cfg := testConfig()
	cfg.Region = "eu-west-1"
	cfg.Endpoint = server.Endpoint()
	cfg.BackOffConfig.InitialInterval = 5 * time.Millisecond
	cfg.BackOffConfig.MaxInterval = 50 * time.Millisecond
	cfg.BackOffConfig.MaxElapsedTime = 0 // retry until shut down
	cfg.QueueConfig.Get().StorageID = &queueStorageID
	if tweak != nil {
		tweak(cfg)
	}
	require.NoError(t, cfg.Validate())

	core, logs := observer.New(zapcore.InfoLevel)
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tt.Shutdown(context.Background()) })
	set := metadatatest.NewSettings(tt)
	set.Logger = zap.New(core)
	exp, err := NewFactory().CreateMetrics(context.Background(), set, cfg)
	require.NoError(t, err)
	ext := newFileStorage(t, dir)
	host := storageHost{Host: componenttest.NewNopHost(), extensions: map[component.ID]component.Component{queueStorageID: ext}}
	require.NoError(t, exp.Start(context.Background(), host))
	return &queuedExporter{
		testExporter: &testExporter{metricsExporter: exp.(*metricsExporter), server: server, telemetry: tt},
		storage:      ext,
		logs:         logs,
	}
}

// stop shuts the exporter down, then its storage (the process exits), and
// says how long the exporter's Shutdown took.
func (qe *queuedExporter) stop(t *testing.T) time.Duration {
	t.Helper()
	begin := time.Now()
	require.NoError(t, qe.testExporter.stop())
	took := time.Since(begin)
	require.NoError(t, qe.storage.Shutdown(context.Background()))
	return took
}

func (qe *queuedExporter) queueSize(t *testing.T) int64 {
	t.Helper()
	n, ok := qe.queue.size(context.Background())
	require.True(t, ok, "the queue's size is readable")
	return n
}

// consumeBatches hands n exports of `series` delta points (value 1, one
// timestamp per export) to the exporter.
func consumeBatches(t *testing.T, exp *testExporter, n, series int) {
	t.Helper()
	begin := time.Now().Add(-time.Minute)
	for i := 0; i < n; i++ {
		ts := pcommon.NewTimestampFromTime(begin.Add(time.Duration(i) * time.Second))
		require.NoError(t, exp.ConsumeMetrics(context.Background(), deltaBatch(series, ts, 1)))
	}
}

func startServer(t *testing.T) *cloudwatchtest.Server {
	t.Helper()
	isolateAWS(t)
	server, err := cloudwatchtest.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = server.Close() })
	return server
}

// The e2e scenario in small: exports wait behind a rate limit and latency
// when the collector is told to stop; Shutdown delivers all of them.
func TestShutdownDrainsThePersistentQueue(t *testing.T) {
	for name, tweak := range map[string]func(*Config){
		"unbatched": nil,
		// The batcher holds what it read until it flushes; the queue counts
		// it until then, so the drain waits for the flush too.
		"batched": func(cfg *Config) {
			cfg.QueueConfig.Get().Batch = configoptional.Some(exporterhelper.BatchConfig{
				FlushTimeout: 300 * time.Millisecond,
				Sizer:        exporterhelper.RequestSizerTypeItems,
				MinSize:      1_000_000,
			})
		},
	} {
		t.Run(name, func(t *testing.T) {
			server := startServer(t)
			server.SetFaults(cloudwatchtest.Faults{Latency: 100 * time.Millisecond})
			dir := t.TempDir()
			const exports, series = 3, 2500
			first := startQueuedExporter(t, server, dir, func(cfg *Config) {
				cfg.MaxRequestsPerSecond = 4
				if tweak != nil {
					tweak(cfg)
				}
			})
			consumeBatches(t, first.testExporter, exports, series)
			require.Positive(t, first.queueSize(t), "data is queued when Shutdown starts")
			first.stop(t)

			// 3 exports of 2500 points of value 1: 7500 datums summing to 7500.
			assertExactlyOnce(t, server.Datums(), exports*series, exports*series)
			assert.Equal(t, 1, first.logs.FilterMessage("Sending what is queued before shutting down").Len())
			assert.Zero(t, withoutInMemoryNotice(first.logs).FilterLevelExact(zapcore.WarnLevel).Len(), "the drain finished in time")

			// Nothing was left on disk for the next start.
			second := startQueuedExporter(t, server, dir, tweak)
			assert.Zero(t, second.queueSize(t))
			second.stop(t)
			assert.Len(t, server.Datums(), exports*series)
		})
	}
}

// CloudWatch is down: the drain gives up at shutdown_drain_timeout, says
// so, and the next start on the same storage sends everything exactly once.
func TestShutdownDrainGivesUpAtTheTimeout(t *testing.T) {
	server := startServer(t)
	require.NoError(t, server.SetDown(true))
	dir := t.TempDir()
	const drainTimeout = 500 * time.Millisecond
	const exports, series = 2, 1500
	first := startQueuedExporter(t, server, dir, func(cfg *Config) { cfg.ShutdownDrainTimeout = drainTimeout })
	consumeBatches(t, first.testExporter, exports, series)
	took := first.stop(t)
	assert.GreaterOrEqual(t, took, drainTimeout)
	assert.Less(t, took, 20*time.Second, "Shutdown ends soon after shutdown_drain_timeout")
	assert.Empty(t, server.Datums())

	warnings := withoutInMemoryNotice(first.logs).FilterLevelExact(zapcore.WarnLevel).All()
	require.Len(t, warnings, 1)
	assert.Contains(t, warnings[0].Message, "stays in the persistent queue and is sent after the next start")
	assert.Equal(t, map[string]any{"left": int64(exports), "unit": "requests", "shutdown_drain_timeout": drainTimeout},
		warnings[0].ContextMap())

	require.NoError(t, server.SetDown(false))
	second := startQueuedExporter(t, server, dir, nil)
	require.Eventually(t, func() bool { return second.queueSize(t) == 0 }, 20*time.Second, 10*time.Millisecond)
	second.stop(t)
	assertExactlyOnce(t, server.Datums(), exports*series, exports*series)
}

func TestShutdownDrainTimeoutZeroDoesNotWait(t *testing.T) {
	server := startServer(t)
	require.NoError(t, server.SetDown(true))
	dir := t.TempDir()
	first := startQueuedExporter(t, server, dir, func(cfg *Config) { cfg.ShutdownDrainTimeout = 0 })
	consumeBatches(t, first.testExporter, 2, 100)
	require.Equal(t, int64(2), first.queueSize(t))
	took := first.stop(t)
	// The default timeout (20 s) would keep it waiting: CloudWatch is down.
	assert.Less(t, took, 10*time.Second)
	assert.Zero(t, first.logs.FilterMessage("Sending what is queued before shutting down").Len(), "no drain")
	assert.Zero(t, withoutInMemoryNotice(first.logs).FilterLevelExact(zapcore.WarnLevel).Len())

	// exporterhelper kept the queue on disk, as without a drain.
	require.NoError(t, server.SetDown(false))
	second := startQueuedExporter(t, server, dir, nil)
	require.Eventually(t, func() bool { return second.queueSize(t) == 0 }, 20*time.Second, 10*time.Millisecond)
	second.stop(t)
	assertExactlyOnce(t, server.Datums(), 200, 200)
}

// The in-memory queue: exporterhelper's Shutdown already sends what it
// holds, once each; during the drain the failed attempts are retried too.
func TestShutdownDrainsTheMemoryQueueWithRetries(t *testing.T) {
	te := newTestExporter(t, true, func(cfg *Config) { cfg.MaxConcurrentRequests = 1 })
	te.server.SetFaults(cloudwatchtest.Faults{ServerErrorEvery: 2, Latency: 20 * time.Millisecond})
	consumeBatches(t, te, 4, 1500)
	require.NoError(t, te.stop())
	assertExactlyOnce(t, te.server.Datums(), 6000, 6000)
	assert.Positive(t, te.server.Stats().ServerErrors)
}

// With no telemetry at all (noop instruments, which are all equal to one
// another), the probe still tells the queue size from the queue capacity.
func TestQueueSizeWithNoopTelemetry(t *testing.T) {
	server := startServer(t)
	require.NoError(t, server.SetDown(true))
	cfg := testConfig()
	cfg.Region = "eu-west-1"
	cfg.Endpoint = server.Endpoint()
	exp, err := NewFactory().CreateMetrics(context.Background(), exportertest.NewNopSettings(metadata.Type), cfg)
	require.NoError(t, err)
	me := exp.(*metricsExporter)
	require.NoError(t, me.Start(context.Background(), componenttest.NewNopHost()))
	consumeBatches(t, &testExporter{metricsExporter: me}, 2, 10)
	n, ok := me.queue.size(context.Background())
	assert.True(t, ok)
	assert.Equal(t, int64(2), n, "the size, not the capacity (1000)")
	me.cfg.ShutdownDrainTimeout = 0
	require.NoError(t, me.Shutdown(context.Background()))
}

func TestQueueSizeWithoutAQueue(t *testing.T) {
	te := newTestExporter(t, false, nil)
	_, ok := te.queue.size(context.Background())
	assert.False(t, ok)
	require.NoError(t, te.stop())
}
