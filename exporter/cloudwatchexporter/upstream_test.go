// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"bytes"

	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/metadata"
	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/queuecompress"
	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/send"
	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/translate"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	pdatarequest "go.opentelemetry.io/collector/pdata/xpdata/request"
)

// The guard tests of upstream.go: each fails when the upstream behaviour
// that the exporter depends on changes.

// The size the drain waits on is the one exporterhelper reports in
// otelcol_exporter_queue_size; it counts a request until it is done, so
// also while it waits for a retry.
func TestQueueSizeIsExporterhelpers(t *testing.T) {
	server := startServer(t)
	require.NoError(t, server.SetDown(true))
	qe := startQueuedExporter(t, server, t.TempDir(), func(cfg *Config) { cfg.ShutdownDrainTimeout = 0 })
	defer qe.stop(t)
	consumeBatches(t, qe.testExporter, 3, 10)
	// Every export was read from the queue and failed at least once.
	require.Eventually(t, func() bool { return qe.counter(t, "requests", "outcome")["network_error"] >= 3 },
		10*time.Second, 5*time.Millisecond)

	assert.Equal(t, int64(3), qe.queueSize(t))
	m, err := qe.telemetry.GetMetric(queueSizeMetricName)
	require.NoError(t, err)
	dps := m.Data.(metricdata.Gauge[int64]).DataPoints
	require.Len(t, dps, 1)
	assert.Equal(t, int64(3), dps[0].Value)
	exporterAttr, _ := dps[0].Attributes.Value("exporter")
	assert.Equal(t, "cloudwatch", exporterAttr.AsString(), "the telemetry is still attributed as before")
}

// refusedByQueue reads exporterhelper's answers to an enqueue: a full
// queue answers ErrQueueIsFull; with block_on_overflow the caller's
// context error is the refusal; an in-memory queue with wait_for_result
// answers a context error also for data it did take, which is no refusal.
func TestQueueRefusalErrorsAreExporterhelpers(t *testing.T) {
	for name, tc := range map[string]struct {
		block, waitForResult, refused bool
	}{
		"queue full": {refused: true},
		"block_on_overflow, caller gave up waiting": {block: true, refused: true},
		"wait_for_result, data taken":               {block: true, waitForResult: true},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := testConfig()
			q := cfg.QueueConfig.Get()
			q.QueueSize, q.NumConsumers, q.BlockOnOverflow, q.WaitForResult = 1, 1, tc.block, tc.waitForResult
			q.Batch = configoptional.None[exporterhelper.BatchConfig]()
			pushed := make(chan struct{}, 2)
			release := make(chan struct{})
			helper, err := exporterhelper.NewMetrics(context.Background(), exportertest.NewNopSettings(metadata.Type), cfg,
				func(context.Context, pmetric.Metrics) error {
					pushed <- struct{}{}
					<-release
					return nil
				}, exporterhelper.WithQueue(cfg.QueueConfig))
			require.NoError(t, err)
			require.NoError(t, helper.Start(context.Background(), componenttest.NewNopHost()))
			defer func() {
				close(release)
				require.NoError(t, helper.Shutdown(context.Background()))
			}()
			consume := func(timeout time.Duration) error {
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				defer cancel()
				return helper.ConsumeMetrics(ctx, gaugeMetrics("g", "", 1))
			}

			var refusal error
			if tc.waitForResult {
				// The consumer takes the data, then the caller stops waiting.
				refusal = consume(100 * time.Millisecond)
				<-pushed
			} else {
				// The first fills the queue: it counts until it is done, and
				// the one consumer holds it.
				require.NoError(t, consume(10*time.Second))
				<-pushed
				refusal = consume(100 * time.Millisecond)
			}
			require.Error(t, refusal)
			m := &metricsExporter{cfg: cfg}
			assert.Equal(t, tc.refused, m.refusedByQueue(refusal), "%v", refusal)
		})
	}
}

// The bytes the exporter sends are the bytes the SDK would send for the
// same datums, and their length is what the packer reckoned.
func TestRequestBodyIsTheSDKs(t *testing.T) {
	datums := sampleDatums()
	sdk := sdkRequest(t, "GPUBuild/Test", datums)
	ours := ourRequest(t, "GPUBuild/Test", datums)
	assert.Equal(t, sdk.body, ours.body)
	assert.Equal(t, sdk.path, ours.path)
	for _, h := range []string{"Content-Type", "Smithy-Protocol", "Accept"} {
		assert.Equal(t, sdk.header.Get(h), ours.header.Get(h), h)
	}
	want := translate.RequestEnvelopeSize("GPUBuild/Test")
	for i := range datums {
		assert.Equal(t, translate.DatumSize(&datums[i]), len(translate.AppendDatum(nil, &datums[i])), datums[i].Name)
		want += translate.DatumSize(&datums[i])
	}
	assert.Len(t, ours.body, want)

	// A translated flush, as the exporter builds it.
	var tr translate.Translation
	translate.NewTranslator(translatorConfig(testConfig())).Translate(convertedBatch(8), time.Now(), &tr)
	require.NotEmpty(t, tr.Datums)
	assert.Equal(t, sdkRequest(t, "GPUBuild/Test", tr.Datums).body, ourRequest(t, "GPUBuild/Test", tr.Datums).body)
}

// Bodies over the SDK's threshold go gzipped, as the SDK sends them; the
// buffers are reused from one request to the next without mixing them up.
func TestRequestBodyGzipAndReuse(t *testing.T) {
	var tr translate.Translation
	translate.NewTranslator(translatorConfig(testConfig())).Translate(convertedBatch(64), time.Now(), &tr)
	big := tr.Datums[:1000]
	small := tr.Datums[:3]

	rec := &recording{}
	p := send.NewPutter(recordingClient(rec))
	for _, ds := range [][]translate.Datum{big, small, big, small} {
		require.NoError(t, p.Put(context.Background(), "GPUBuild/Test", ds))
		assert.Equal(t, translate.AppendPutMetricData(nil, "GPUBuild/Test", ds), rec.body)
		assert.Equal(t, len(ds) == len(big), rec.header.Get("Content-Encoding") == "gzip")
	}
	assert.Equal(t, "gzip", sdkRequest(t, "GPUBuild/Test", big).header.Get("Content-Encoding"), "the SDK compresses such a body too")
}

// The persistent queue takes its storage client by the signal's name and
// stores each request under its decimal index, its metadata under other
// keys: the requests are stored compressed and the metadata as
// exporterhelper wrote it (queuecompress, upstream.go). Read straight from
// the file, after the collector stopped with the requests still queued.
func TestQueuedRequestsAreStoredCompressed(t *testing.T) {
	server := startServer(t)
	require.NoError(t, server.SetDown(true))
	dir := t.TempDir()
	qe := startQueuedExporter(t, server, dir, func(cfg *Config) { cfg.ShutdownDrainTimeout = 0 })
	const batches, series = 3, 200
	consumeBatches(t, qe.testExporter, batches, series)
	qe.stop(t)

	items, points := 0, 0
	var metadataKeys []string
	walkQueue(t, dir, func(key string, value []byte) {
		if !isQueueItemKey(key) {
			metadataKeys = append(metadataKeys, key)
			assert.False(t, queuecompress.Compressed(value), "metadata %q is stored as exporterhelper wrote it", key)
			return
		}
		items++
		require.True(t, queuecompress.Compressed(value), "request %q is stored compressed", key)
		raw, err := queuecompress.Decode(value)
		require.NoError(t, err)
		assert.Less(t, len(value)*3, len(raw), "request %q: stored at least 3x smaller", key)
		_, md, err := pdatarequest.UnmarshalMetrics(raw)
		require.NoError(t, err, "request %q is exporterhelper's serialized request", key)
		points += md.DataPointCount()
	})
	assert.Equal(t, batches, items)
	assert.Equal(t, batches*series, points)
	assert.NotEmpty(t, metadataKeys, "the queue keeps its metadata beside the requests")
}

// walkQueue calls fn with every entry of the exporter's queue file in dir,
// as stored, through a plain file_storage client.
func walkQueue(t *testing.T, dir string, fn func(key string, value []byte)) {
	t.Helper()
	ctx := context.Background()
	ext := newFileStorage(t, dir).(storage.Extension)
	defer func() { require.NoError(t, ext.Shutdown(ctx)) }()
	client, err := ext.GetClient(ctx, component.KindExporter, component.NewID(metadata.Type), queueClientName)
	require.NoError(t, err)
	defer func() { require.NoError(t, client.Close(ctx)) }()
	require.NoError(t, client.(storage.Walker).Walk(ctx, func(key string, value []byte) ([]*storage.Operation, error) {
		fn(key, bytes.Clone(value))
		return nil, nil
	}))
}
