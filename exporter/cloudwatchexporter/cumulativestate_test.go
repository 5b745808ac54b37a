// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/delta"
	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/metadatatest"
	"github.com/gpubuild/otelcol-gpubuild/internal/cumulative"
	"github.com/gpubuild/otelcol-gpubuild/internal/state/journal"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/storagetest"
)

var stateStorageID = component.MustNewID("file_storage")

// startStoredExporter starts an exporter (no sending queue, no retry: an
// export is done when ConsumeMetrics returns) whose cumulative state is in
// ext, sending to server. It is never shut down: dropping it is a kill -9.
func startStoredExporter(t *testing.T, server *cloudwatchtest.Server, ext component.Component) *testExporter {
	t.Helper()
	return startStoredExporterWith(t, server, ext, func(*Config) {})
}

// startStoredExporterWith is startStoredExporter with cfg changed by change.
func startStoredExporterWith(t *testing.T, server *cloudwatchtest.Server, ext component.Component, change func(*Config)) *testExporter {
	t.Helper()
	cfg := testConfig()
	change(cfg)
	cfg.Region = "eu-west-1"
	cfg.Endpoint = server.Endpoint()
	cfg.QueueConfig = configoptional.None[exporterhelper.QueueBatchConfig]()
	cfg.BackOffConfig.Enabled = false
	cfg.CumulativeState.Storage = &stateStorageID
	require.NoError(t, cfg.Validate())

	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tt.Shutdown(context.Background()) })
	exp, err := NewFactory().CreateMetrics(context.Background(), metadatatest.NewSettings(tt), cfg)
	require.NoError(t, err)
	host := storageHost{Host: componenttest.NewNopHost(), extensions: map[component.ID]component.Component{stateStorageID: ext}}
	require.NoError(t, exp.Start(context.Background(), host))
	return &testExporter{metricsExporter: exp.(*metricsExporter), server: server, telemetry: tt}
}

// sentValues lists the values CloudWatch accepted for a metric, in order.
func sentValues(server *cloudwatchtest.Server, name string) []float64 {
	var values []float64
	for _, d := range server.Datums() {
		if d.MetricName == name && d.Value != nil {
			values = append(values, *d.Value)
		}
	}
	return values
}

func TestStateSurvivesARestart(t *testing.T) {
	for _, walk := range []bool{true, false} {
		t.Run(map[bool]string{true: "listed at start", false: "read per series"}[walk], func(t *testing.T) {
			server := startServer(t)
			d := newDisk()
			point := minuteCounter()

			first := startStoredExporter(t, server, &diskStorage{disk: d, walk: walk})
			for i, v := range []int64{10, 25, 40} {
				require.NoError(t, first.ConsumeMetrics(context.Background(), point(i+1, v)))
			}
			// The process dies (no Shutdown); the service keeps counting.
			second := startStoredExporter(t, server, &diskStorage{disk: d, walk: walk})
			for i, v := range []int64{52, 70} {
				require.NoError(t, second.ConsumeMetrics(context.Background(), point(i+4, v)))
			}

			// 10 since start, 25-10, 40-25; after the restart 52-40 (not 52), 70-52.
			assert.Equal(t, []float64{10, 15, 15, 12, 18}, sentValues(server, "requests"))
			assert.Equal(t, 70.0, sum(sentValues(server, "requests")), "CloudWatch's total is the counter's")
			assert.Empty(t, second.counter(t, "points_dropped", "reason"))
			assert.Empty(t, second.counter(t, "cumulative_storage_errors", "operation"))
		})
	}
}

// newFileStorage starts a contrib file_storage extension over dir.
func newFileStorage(tb testing.TB, dir string) extension.Extension {
	tb.Helper()
	return storagetest.FileStorage(tb, dir, false)
}

// The same restart on the real file_storage: the first process's database
// is closed under the exporter, without its Shutdown (as a kill releases
// the file), and the second process opens the same file.
func TestStateSurvivesARestartOnFileStorage(t *testing.T) {
	server := startServer(t)
	dir := t.TempDir()
	begin := time.Now().Add(-10 * time.Minute)
	start := pcommon.NewTimestampFromTime(begin)
	md := func(i int, counter int64, buckets []uint64, total, maxV float64) pmetric.Metrics {
		ts := pcommon.NewTimestampFromTime(begin.Add(time.Duration(i) * time.Minute))
		md := cumulativeSum(start, ts, counter, nil)
		h := cumulativeHistogram(start, ts, []float64{1, 10}, buckets, total, 0.5, maxV)
		h.ResourceMetrics().MoveAndAppendTo(md.ResourceMetrics())
		return md
	}

	ext := newFileStorage(t, dir)
	first := startStoredExporter(t, server, ext)
	// Latencies 0.5 and 2.5, then 2 and 20.
	require.NoError(t, first.ConsumeMetrics(context.Background(), md(1, 10, []uint64{1, 1, 0}, 3, 2.5)))
	require.NoError(t, first.ConsumeMetrics(context.Background(), md(2, 25, []uint64{1, 2, 1}, 25, 20)))
	require.NoError(t, first.deltas.Store.Close(context.Background()))

	second := startStoredExporter(t, server, newFileStorage(t, dir))
	// Meanwhile: 12 more requests; two latencies, 0.7 and 4.3.
	require.NoError(t, second.ConsumeMetrics(context.Background(), md(3, 37, []uint64{2, 3, 1}, 30, 20)))
	require.NoError(t, second.Shutdown(context.Background()))

	assert.Equal(t, []float64{10, 15, 12}, sentValues(server, "requests"))
	st, n := statistics(server.Datums(), "latency")
	assert.Equal(t, 3, n)
	// CloudWatch's totals are the histogram's: 6 observations summing to 30.
	assert.Equal(t, 6.0, st.SampleCount)
	assert.InDelta(t, 30.0, st.Sum, 1e-9)
	assert.Empty(t, second.counter(t, "points_dropped", "reason"))
}

// With the journal (the shipped configuration) each save is a record
// appended to the journal, written into file_storage at the checkpoint: a
// process killed before any checkpoint left its state in the journal only,
// and the next start writes it into the storage before restoring it.
func TestStateSurvivesAKillInItsJournal(t *testing.T) {
	server := startServer(t)
	dir := t.TempDir()
	withJournal := func(cfg *Config) { cfg.CumulativeState.Journal.Directory = dir }
	point := minuteCounter()
	path := filepath.Join(dir, "journal_exporter_cloudwatch__cumulative_state")

	first := startStoredExporterWith(t, server, newFileStorage(t, dir), withJournal)
	for i, v := range []int64{10, 25} {
		require.NoError(t, first.ConsumeMetrics(context.Background(), point(i+1, v)))
	}
	jc, ok := first.deltas.Store.(*journal.Client)
	require.True(t, ok, "the state is saved through the journal")
	require.NoError(t, jc.Storage().Close(context.Background())) // killed: the journal is not checkpointed
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Greater(t, st.Size(), int64(8), "the saves are in the journal")

	second := startStoredExporterWith(t, server, newFileStorage(t, dir), withJournal)
	require.NoError(t, second.ConsumeMetrics(context.Background(), point(3, 37)))
	require.NoError(t, second.Shutdown(context.Background()))
	st, err = os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, int64(8), st.Size(), "Shutdown writes the journal into the storage and empties it")

	// 10 since start, 25-10; after the kill 37-25 (not 37).
	assert.Equal(t, []float64{10, 15, 12}, sentValues(server, "requests"))
	assert.Empty(t, second.counter(t, "points_dropped", "reason"))
	assert.Empty(t, second.counter(t, "cumulative_storage_errors", "operation"))

	// And the third start reads it from the storage alone.
	third := startStoredExporterWith(t, server, newFileStorage(t, dir), withJournal)
	require.NoError(t, third.ConsumeMetrics(context.Background(), point(4, 50)))
	require.NoError(t, third.Shutdown(context.Background()))
	assert.Equal(t, []float64{10, 15, 12, 13}, sentValues(server, "requests"))
}

// minuteCounter is the "requests" counter of these tests: started ten
// minutes ago, its i-th point i minutes after its start.
func minuteCounter() func(i int, v int64) pmetric.Metrics {
	begin := time.Now().Add(-10 * time.Minute)
	start := pcommon.NewTimestampFromTime(begin)
	return func(i int, v int64) pmetric.Metrics {
		return cumulativeSum(start, pcommon.NewTimestampFromTime(begin.Add(time.Duration(i)*time.Minute)), v, nil)
	}
}

func sum(vs []float64) float64 {
	var s float64
	for _, v := range vs {
		s += v
	}
	return s
}

func TestStateUndoneExportIsNotSaved(t *testing.T) {
	server := startServer(t)
	d := newDisk()
	point := minuteCounter()

	first := startStoredExporter(t, server, &diskStorage{disk: d, walk: true})
	require.NoError(t, first.ConsumeMetrics(context.Background(), point(1, 10)))
	// CloudWatch is unreachable and retries are off: the export of 30 fails
	// and its conversion is undone; the saved state must stay at 10.
	require.NoError(t, server.SetDown(true))
	require.Error(t, first.ConsumeMetrics(context.Background(), point(2, 30)))
	require.NoError(t, server.SetDown(false))

	second := startStoredExporter(t, server, &diskStorage{disk: d, walk: true})
	require.NoError(t, second.ConsumeMetrics(context.Background(), point(3, 45)))
	// 10 since start; after the restart 45-10: the failed interval is covered.
	assert.Equal(t, []float64{10, 35}, sentValues(server, "requests"))
}

func TestStateReadErrorIsABaseline(t *testing.T) {
	server := startServer(t)
	d := newDisk()
	point := minuteCounter()
	first := startStoredExporter(t, server, &diskStorage{disk: d})
	require.NoError(t, first.ConsumeMetrics(context.Background(), point(1, 10)))

	// After the restart the storage cannot be read: 25 may not be sent
	// whole (it may count 10 twice), nor as 15 (unknown): it is a baseline.
	second := startStoredExporter(t, server, &diskStorage{disk: d})
	d.mu.Lock()
	d.getErr = errors.New("disk on fire")
	d.mu.Unlock()
	require.NoError(t, second.ConsumeMetrics(context.Background(), point(2, 25)))
	d.mu.Lock()
	d.getErr = nil
	d.mu.Unlock()
	require.NoError(t, second.ConsumeMetrics(context.Background(), point(3, 31)))

	// 10, then nothing for 25, then 31-25.
	assert.Equal(t, []float64{10, 6}, sentValues(server, "requests"))
	assert.Equal(t, map[string]int64{"read": 1}, second.counter(t, "cumulative_storage_errors", "operation"))
	assert.Equal(t, map[string]int64{"cumulative_baseline": 1}, second.counter(t, "points_dropped", "reason"))
}

func TestStateWriteErrorIsCountedAndRetried(t *testing.T) {
	server := startServer(t)
	d := newDisk()
	point := minuteCounter()
	te := startStoredExporter(t, server, &diskStorage{disk: d, walk: true})
	d.mu.Lock()
	d.batchErr = errors.New("no space left on device")
	d.mu.Unlock()
	// The data is sent: a storage failure loses nothing now.
	require.NoError(t, te.ConsumeMetrics(context.Background(), point(1, 10)))
	assert.Equal(t, map[string]int64{"write": 1}, te.counter(t, "cumulative_storage_errors", "operation"))
	assert.Empty(t, d.keys(""))

	d.mu.Lock()
	d.batchErr = nil
	d.mu.Unlock()
	require.NoError(t, te.ConsumeMetrics(context.Background(), point(2, 16)))
	assert.Equal(t, []float64{10, 6}, sentValues(server, "requests"))
	assert.Len(t, d.keys(""), 2, "the series and the watermark are written with the next point")
}

// notStorage is an extension that is not a storage.
type notStorage struct {
	component.StartFunc
	component.ShutdownFunc
}

func TestStateStorageMustBeAStorageExtension(t *testing.T) {
	cfg := testConfig()
	cfg.OutputDestination = destinationFile
	cfg.OutputPath = t.TempDir() + "/out.jsonl"
	cfg.CumulativeState.Storage = &stateStorageID
	for name, host := range map[string]component.Host{
		`state.storage: no extension "file_storage" is configured`: componenttest.NewNopHost(),
		`state.storage: extension "file_storage" is not a storage extension`: storageHost{
			Host: componenttest.NewNopHost(), extensions: map[component.ID]component.Component{stateStorageID: notStorage{}},
		},
	} {
		exp, err := NewFactory().CreateMetrics(context.Background(), exporterSettings(), cfg)
		require.NoError(t, err)
		assert.EqualError(t, exp.Start(context.Background(), host), name)
		require.NoError(t, exp.Shutdown(context.Background()))
	}
}

var stateTestConfig = CumulativeStateConfig{TTL: 30 * time.Minute, MaxSeries: 100}

func TestStateQueueRefusalIsNotSaved(t *testing.T) {
	d := newDisk()
	c, _ := storedConverter(t, d, true, stateTestConfig, testNow)
	convertAndSave(t, c, cumulativeSum(at(-time.Hour), at(0), 10, nil), testNow)
	saved := d.keys("")
	before := map[string][]byte{}
	for _, k := range saved {
		before[k] = d.data[k]
	}

	// The queue is full: the conversion of 25 is undone, then saved as
	// ConsumeMetrics does. Nothing changes on disk.
	var cv delta.Conversion
	c.Convert(context.Background(), cumulativeSum(at(-time.Hour), at(time.Minute), 25, nil), testNow, &cv)
	c.Undo(cv.Records)
	require.NoError(t, c.Save(context.Background(), cv.Records))
	for _, k := range saved {
		assert.Equal(t, before[k], d.data[k])
	}

	// Restarted: 31-10, covering the refused interval.
	c, _ = storedConverter(t, d, true, stateTestConfig, testNow)
	md := cumulativeSum(at(-time.Hour), at(2*time.Minute), 31, nil)
	convertAndSave(t, c, md, testNow)
	v, _ := sumPoint(t, md)
	assert.Equal(t, int64(21), v)
}

func TestStateOneBatchPerExport(t *testing.T) {
	d := newDisk()
	c, _ := storedConverter(t, d, true, stateTestConfig, testNow)
	now := time.Now()
	start := pcommon.NewTimestampFromTime(now.Add(-time.Hour))
	md := mixedBatch(4, start, pcommon.NewTimestampFromTime(now), 0)
	convertAndSave(t, c, md, now)
	// 4 GPUs, each 4 counters with 4 attribute sets and 4 histogram series
	// (the exponential histograms are delta: no state), and the watermark.
	assert.Len(t, d.keys(cumulative.SeriesKeyPrefix), 80)
	assert.Len(t, d.keys(cumulative.WatermarkKey), 1)
	assert.Equal(t, 1, d.batches)

	// A batch without cumulative data writes nothing.
	convertAndSave(t, c, gaugeMetrics("g", "", 1), now)
	assert.Equal(t, 1, d.batches)
}

// Exports converted and saved concurrently (several receivers or pipelines)
// leave every series saved at its newest point.
func TestStateConcurrentSaves(t *testing.T) {
	d := newDisk()
	c, _ := storedConverter(t, d, true, stateTestConfig, testNow)
	const writers, points = 4, 25
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := map[string]string{"writer": string(rune('a' + w))}
			for i := 1; i <= points; i++ {
				md := cumulativeSum(at(-time.Hour), at(time.Duration(i)*time.Second), int64(10*i), name)
				var cv delta.Conversion
				c.Convert(context.Background(), md, testNow, &cv)
				assert.NoError(t, c.Save(context.Background(), cv.Records))
			}
		}()
	}
	wg.Wait()

	// Restarted: each series' next point (10 more) is a delta of 10.
	c, load := storedConverter(t, d, true, stateTestConfig, testNow)
	assert.Equal(t, writers, load.Restored)
	for w := range writers {
		md := cumulativeSum(at(-time.Hour), at(time.Minute), 10*(points+1), map[string]string{"writer": string(rune('a' + w))})
		convertAndSave(t, c, md, testNow)
		v, ok := sumPoint(t, md)
		assert.True(t, ok)
		assert.Equal(t, int64(10), v, "writer %d", w)
	}
}

func TestStateCloseWritesWhatIsLeft(t *testing.T) {
	d := newDisk()
	c, _ := storedConverter(t, d, true, stateTestConfig, testNow)
	convertAndSave(t, c, cumulativeSum(at(-time.Hour), at(0), 10, nil), testNow)
	require.Len(t, d.keys(cumulative.SeriesKeyPrefix), 1)

	// An hour later a batch without cumulative data expires the series:
	// nothing to save with it, so its deletion waits for Shutdown.
	var cv delta.Conversion
	c.Convert(context.Background(), gaugeMetrics("g", "", 1), testNow.Add(time.Hour), &cv)
	assert.Equal(t, int64(1), cv.Evictions)
	require.Len(t, d.keys(cumulative.SeriesKeyPrefix), 1)
	require.NoError(t, c.CloseStorage(context.Background()))
	assert.Empty(t, d.keys(cumulative.SeriesKeyPrefix))
	require.NoError(t, c.CloseStorage(context.Background()), "a second Shutdown is harmless")
}
