// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package admissionextension

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gpubuild/otelcol-gpubuild/extension/admissionextension/internal/metadatatest"
)

// heapStub is a heap reader whose value the test sets, counting its reads.
type heapStub struct {
	mib   atomic.Uint64
	reads atomic.Int64
}

func (h *heapStub) read() uint64 { h.reads.Add(1); return h.mib.Load() << 20 }

// memoryExtension has limit_mib 100, spike_limit_mib 20, no forced
// collection under the hard limit (min_gc_interval_when_soft_limited 1h)
// and one on every check above it; gc stands for the runtime's collection.
func memoryExtension(t *testing.T, tt *componenttest.Telemetry, heap *heapStub, gc func()) *admissionExtension {
	t.Helper()
	cfg := createDefaultConfig().(*Config)
	cfg.MaxInFlight = 1
	cfg.Memory.LimitMiB, cfg.Memory.SpikeLimitMiB = 100, 20
	cfg.Memory.CheckInterval = 0 // every request reads: the test sees each change at once
	cfg.Memory.MinGCIntervalWhenSoftLimited, cfg.Memory.MinGCIntervalWhenHardLimited = time.Hour, 0
	require.NoError(t, cfg.Validate())
	ext, err := newExtension(metadatatest.NewSettings(tt), cfg, heap.read, gc)
	require.NoError(t, err)
	return ext
}

func refusedForMemory(n int64) []metricdata.DataPoint[int64] {
	return []metricdata.DataPoint[int64]{{Value: n, Attributes: attribute.NewSet(attribute.String("reason", "memory"))}}
}

// Above the soft limit (limit_mib - spike_limit_mib) a gRPC request is
// refused in the tap, before its message is read, with UNAVAILABLE and a
// retry delay; it is admitted again once the heap is under the soft limit.
// No request, no reading of the heap.
func TestGRPCRequestsAreRefusedWhileTheHeapIsHigh(t *testing.T) {
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tt.Shutdown(context.Background()) })
	heap, gcs := &heapStub{}, &atomic.Int64{}
	heap.mib.Store(80)
	ext := memoryExtension(t, tt, heap, func() { gcs.Add(1) })
	opts, err := ext.GetGRPCServerOptions(context.Background())
	require.NoError(t, err)
	svc := &blockingMetrics{entered: make(chan struct{}, 4), unblock: make(chan struct{})}
	close(svc.unblock)
	client := pmetricotlp.NewGRPCClient(serve(t, svc, opts...))
	assert.Zero(t, heap.reads.Load(), "nothing read while no request arrives")

	_, err = client.Export(context.Background(), pmetricotlp.NewExportRequest())
	st := status.Convert(err)
	require.Equal(t, codes.Unavailable, st.Code(), "refused at the soft limit: %v", err)
	require.Len(t, st.Details(), 1)
	info, ok := st.Details()[0].(*errdetails.RetryInfo)
	require.True(t, ok, "with a retry delay")
	assert.Equal(t, time.Second, info.GetRetryDelay().AsDuration())
	assert.Empty(t, svc.entered, "the refused request never reached the service")
	metadatatest.AssertEqualAdmissionRefusedRequests(t, tt, refusedForMemory(1), metricdatatest.IgnoreTimestamp())

	heap.mib.Store(79)
	_, err = client.Export(context.Background(), pmetricotlp.NewExportRequest())
	require.NoError(t, err, "admitted under the soft limit")
	<-svc.entered
	assert.Zero(t, gcs.Load(), "no collection: the refused reading was under the hard limit and min_gc_interval_when_soft_limited had not passed")
}

// The HTTP middleware refuses with a retryable 503 before the handler (which
// reads the body) while the heap is above the soft limit; above the hard
// limit it forces a collection and admits the request if that freed enough.
func TestHTTPRequestsAreRefusedWhileTheHeapIsHigh(t *testing.T) {
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tt.Shutdown(context.Background()) })
	heap, gcs := &heapStub{}, &atomic.Int64{}
	ext := memoryExtension(t, tt, heap, func() { gcs.Add(1); heap.mib.Store(30) })
	wrap, err := ext.GetHTTPHandler(context.Background())
	require.NoError(t, err)
	var handled atomic.Int64
	h, err := wrap(context.Background(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		handled.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	defer srv.Close()
	post := func() *http.Response {
		resp, err := http.Post(srv.URL, "application/x-protobuf", bytes.NewReader(make([]byte, 1024)))
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp
	}

	heap.mib.Store(90)
	resp := post()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, "1", resp.Header.Get("Retry-After"))
	assert.Zero(t, handled.Load(), "the refused request never reached the handler")
	assert.Zero(t, gcs.Load(), "no collection under the hard limit within min_gc_interval_when_soft_limited")
	metadatatest.AssertEqualAdmissionRefusedRequests(t, tt, refusedForMemory(1), metricdatatest.IgnoreTimestamp())

	// Above the hard limit: a collection, then the heap is read again.
	heap.mib.Store(120)
	reads := heap.reads.Load()
	resp = post()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "the forced collection brought the heap under the soft limit")
	assert.Equal(t, int64(1), gcs.Load())
	assert.Equal(t, reads+2, heap.reads.Load(), "read, collect, read again")
	assert.Equal(t, int64(1), handled.Load())
}

// Without memory.limit_mib the heap is never read.
func TestNoMemoryCheckWithoutALimit(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	heap := &heapStub{}
	heap.mib.Store(1 << 20)
	ext, err := newExtension(metadatatest.NewSettings(componenttest.NewTelemetry()), cfg, heap.read, nil)
	require.NoError(t, err)
	wrap, err := ext.GetHTTPHandler(context.Background())
	require.NoError(t, err)
	h, err := wrap(context.Background(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/metrics", nil))
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Zero(t, heap.reads.Load())
}
