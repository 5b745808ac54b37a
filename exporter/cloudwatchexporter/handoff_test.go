// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/metadatatest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
)

// fakePeer is another gateway's OTLP receiver for hand-offs: it takes the
// first `accept` requests (all when negative) and refuses the rest.
type fakePeer struct {
	pmetricotlp.UnimplementedGRPCServer
	addr string

	mu       sync.Mutex
	accept   int
	requests int
	points   int
	sum      int64
	refused  int
}

func startFakePeer(t *testing.T, accept int) *fakePeer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &fakePeer{addr: ln.Addr().String(), accept: accept}
	s := grpc.NewServer()
	pmetricotlp.RegisterGRPCServer(s, p)
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(s.Stop)
	return p
}

func (p *fakePeer) Export(_ context.Context, req pmetricotlp.ExportRequest) (pmetricotlp.ExportResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.accept >= 0 && p.requests >= p.accept {
		p.refused++
		return pmetricotlp.NewExportResponse(), status.Error(codes.Unavailable, "the peer refuses")
	}
	p.requests++
	md := req.Metrics()
	p.points += md.DataPointCount()
	forEachSumPoint(md, func(dp pmetric.NumberDataPoint) { p.sum += dp.IntValue() })
	return pmetricotlp.NewExportResponse(), nil
}

func (p *fakePeer) totals() (requests, points int, sum int64, refused int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.requests, p.points, p.sum, p.refused
}

func forEachSumPoint(md pmetric.Metrics, fn func(pmetric.NumberDataPoint)) {
	for _, rm := range md.ResourceMetrics().All() {
		for _, sm := range rm.ScopeMetrics().All() {
			for _, m := range sm.Metrics().All() {
				if m.Type() == pmetric.MetricTypeSum {
					for _, dp := range m.Sum().DataPoints().All() {
						fn(dp)
					}
				}
			}
		}
	}
}

// withHandoff: a short drain, then the hand-off to endpoint.
func withHandoff(endpoint string, timeout time.Duration) func(*Config) {
	return func(cfg *Config) {
		cfg.ShutdownDrainTimeout = 200 * time.Millisecond
		cfg.Handoff.Endpoint = endpoint
		cfg.Handoff.TLS.Insecure = true
		cfg.Handoff.Timeout = timeout
	}
}

const handoffExports, handoffSeries = 3, 500

// CloudWatch is down at Shutdown: the drain gives up, the hand-off sends
// every queued request to the peer once, the queue is left empty (the next
// start on the same storage has nothing to send) and CloudWatch gets none.
func TestHandoffSendsWhatTheDrainLeftToThePeer(t *testing.T) {
	server := startServer(t)
	require.NoError(t, server.SetDown(true))
	peer := startFakePeer(t, -1)
	dir := t.TempDir()
	first := startQueuedExporter(t, server, dir, withHandoff(peer.addr, 20*time.Second))
	consumeBatches(t, first.testExporter, handoffExports, handoffSeries)
	require.Positive(t, first.queueSize(t))
	first.stop(t)

	_, points, sum, _ := peer.totals()
	assert.Equal(t, handoffExports*handoffSeries, points, "every queued point was handed off once")
	assert.Equal(t, int64(handoffExports*handoffSeries), sum)
	assert.Equal(t, 1, first.logs.FilterMessage("Handed what the drain left to the peer").Len())
	assert.Zero(t, first.logs.FilterMessageSnippet("did not empty the queue before handoff.timeout").Len())

	require.NoError(t, server.SetDown(false))
	second := startQueuedExporter(t, server, dir, nil)
	assert.Zero(t, second.queueSize(t), "nothing is left on disk")
	second.stop(t)
	assert.Empty(t, server.Datums(), "what the peer took is not sent again")
}

// The peer takes one request, then refuses: what it took leaves the queue,
// the rest stays (logged with counts) and is sent after the next start:
// every point lands once, at the peer or at CloudWatch.
func TestHandoffKeepsWhatThePeerRefuses(t *testing.T) {
	server := startServer(t)
	require.NoError(t, server.SetDown(true))
	peer := startFakePeer(t, 1)
	dir := t.TempDir()
	first := startQueuedExporter(t, server, dir, withHandoff(peer.addr, time.Second))
	consumeBatches(t, first.testExporter, handoffExports, handoffSeries)
	first.stop(t)

	requests, points, sum, refused := peer.totals()
	require.Equal(t, 1, requests)
	require.Positive(t, refused)
	require.Positive(t, points)
	warn := first.logs.FilterMessageSnippet("did not empty the queue before handoff.timeout").All()
	require.Len(t, warn, 1)
	assert.Equal(t, int64(1), warn[0].ContextMap()["handed_off_requests"])
	assert.Positive(t, warn[0].ContextMap()["left"])

	require.NoError(t, server.SetDown(false))
	second := startQueuedExporter(t, server, dir, nil)
	require.Eventually(t, func() bool { return second.queueSize(t) == 0 }, 20*time.Second, 10*time.Millisecond)
	second.stop(t)
	rest := handoffExports*handoffSeries - points
	assertExactlyOnce(t, server.Datums(), rest, float64(int64(handoffExports*handoffSeries)-sum))
}

// No peer listens: everything stays in the queue and is sent after the
// next start, once.
func TestHandoffKeepsEverythingWhenThePeerIsUnreachable(t *testing.T) {
	server := startServer(t)
	require.NoError(t, server.SetDown(true))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := ln.Addr().String()
	require.NoError(t, ln.Close())
	dir := t.TempDir()
	first := startQueuedExporter(t, server, dir, withHandoff(closed, time.Second))
	consumeBatches(t, first.testExporter, handoffExports, handoffSeries)
	queued := first.queueSize(t)
	first.stop(t)

	warn := first.logs.FilterMessageSnippet("did not empty the queue before handoff.timeout").All()
	require.Len(t, warn, 1)
	assert.Equal(t, int64(0), warn[0].ContextMap()["handed_off_requests"])
	assert.Equal(t, queued, warn[0].ContextMap()["left"])

	require.NoError(t, server.SetDown(false))
	second := startQueuedExporter(t, server, dir, nil)
	require.Eventually(t, func() bool { return second.queueSize(t) == 0 }, 20*time.Second, 10*time.Millisecond)
	second.stop(t)
	assertExactlyOnce(t, server.Datums(), handoffExports*handoffSeries, handoffExports*handoffSeries)
}

// A batch CloudWatch took in part before the drain ended (its first
// PutMetricData call answered, the others failing from then on) is handed
// off as the part left: every point lands once, at CloudWatch or at the
// peer, none at both.
func TestHandoffSendsOnlyWhatCloudWatchDidNotTake(t *testing.T) {
	server := startServer(t)
	server.OnAccept(func([]cloudwatchtest.Datum) { server.SetFaults(cloudwatchtest.Faults{ServerErrorEvery: 1}) })
	peer := startFakePeer(t, -1)
	first := startQueuedExporter(t, server, t.TempDir(), func(cfg *Config) {
		withHandoff(peer.addr, 20*time.Second)(cfg)
		cfg.MaxConcurrentRequests = 1
	})
	const series = 2500 // three PutMetricData calls of at most 1,000 datums
	consumeBatches(t, first.testExporter, 1, series)
	first.stop(t)

	taken := server.Datums()
	require.Len(t, taken, 1000, "CloudWatch took the first call")
	_, points, sum, _ := peer.totals()
	assert.Equal(t, series-len(taken), points, "the peer got the rest, and only the rest")
	assert.Equal(t, int64(series-len(taken)), sum)
}

// A drain that sends everything leaves nothing to hand off: the peer is
// not contacted.
func TestHandoffIdleWhenTheDrainEmptiedTheQueue(t *testing.T) {
	server := startServer(t)
	peer := startFakePeer(t, -1)
	first := startQueuedExporter(t, server, t.TempDir(), func(cfg *Config) {
		withHandoff(peer.addr, time.Second)(cfg)
		cfg.ShutdownDrainTimeout = 20 * time.Second
	})
	consumeBatches(t, first.testExporter, handoffExports, handoffSeries)
	first.stop(t)
	requests, _, _, refused := peer.totals()
	assert.Zero(t, requests+refused)
	assertExactlyOnce(t, server.Datums(), handoffExports*handoffSeries, handoffExports*handoffSeries)
	assert.Zero(t, first.logs.FilterLevelExact(zapcore.WarnLevel).FilterMessageSnippet("hand").Len())
}

func TestHandoffConfigValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		tweak func(*Config)
		want  string
	}{
		"endpoint without a port": {func(cfg *Config) { cfg.Handoff.Endpoint = "peer" }, "handoff.endpoint"},
		"timeout":                 {func(cfg *Config) { cfg.Handoff.Endpoint = "peer:4319"; cfg.Handoff.Timeout = 0 }, "handoff.timeout: must be positive"},
		"in-memory queue": {func(cfg *Config) {
			cfg.Handoff.Endpoint = "peer:4319"
			cfg.QueueConfig.Get().StorageID = nil
		}, "handoff.endpoint: needs a persistent sending_queue"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := testConfig()
			cfg.QueueConfig.Get().StorageID = &queueStorageID
			tc.tweak(cfg)
			assert.ErrorContains(t, cfg.Validate(), tc.want)
		})
	}
	cfg := testConfig()
	require.NoError(t, cfg.Validate(), "no endpoint: no hand-off, nothing else required")
	cfg.QueueConfig.Get().StorageID = &queueStorageID
	cfg.Handoff.Endpoint = "dns:///otelcol-gateway.observability.svc.cluster.local:4319"
	require.NoError(t, cfg.Validate())
}

// writeRecorder is a storage extension that counts the queue's item writes
// once its storage has committed them.
type writeRecorder struct {
	storage.Extension
	written atomic.Int64
}

func (w *writeRecorder) GetClient(ctx context.Context, kind component.Kind, id component.ID, name string) (storage.Client, error) {
	c, err := w.Extension.GetClient(ctx, kind, id, name)
	return &writeRecordingClient{Client: c, written: &w.written}, err
}

type writeRecordingClient struct {
	storage.Client
	written *atomic.Int64
}

func (c *writeRecordingClient) Batch(ctx context.Context, ops ...*storage.Operation) error {
	err := c.Client.Batch(ctx, ops...)
	for _, op := range ops {
		if err == nil && op.Type == storage.Set && isQueueItemKey(op.Key) {
			c.written.Add(1)
		}
	}
	return err
}

// The peer acknowledges a hand-off when its exporter's ConsumeMetrics
// returns: exporterhelper's persistent queue returns from it only once the
// request is written to the storage (an upstream behaviour the hand-off
// relies on; upstream.go).
func TestConsumeMetricsReturnsOnceTheRequestIsStored(t *testing.T) {
	server := startServer(t)
	require.NoError(t, server.SetDown(true))
	cfg := testConfig()
	cfg.Region = "eu-west-1"
	cfg.Endpoint = server.Endpoint()
	cfg.ShutdownDrainTimeout = 0
	cfg.QueueConfig.Get().StorageID = &queueStorageID
	exp, err := NewFactory().CreateMetrics(context.Background(), metadatatest.NewSettings(componenttest.NewTelemetry()), cfg)
	require.NoError(t, err)
	rec := &writeRecorder{Extension: newFileStorage(t, t.TempDir()).(storage.Extension)}
	host := storageHost{Host: componenttest.NewNopHost(), extensions: map[component.ID]component.Component{queueStorageID: rec}}
	require.NoError(t, exp.Start(context.Background(), host))
	for i := int64(1); i <= 3; i++ {
		require.NoError(t, exp.ConsumeMetrics(context.Background(), deltaBatch(10, pcommon.NewTimestampFromTime(time.Now()), 1)))
		assert.Equal(t, i, rec.written.Load(), "request %d is stored when ConsumeMetrics returns", i)
	}
	require.NoError(t, exp.Shutdown(context.Background()))
	require.NoError(t, rec.Shutdown(context.Background()))
}
