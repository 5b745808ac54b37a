// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package pipelinehealthreceiver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/gpubuild/otelcol-gpubuild/receiver/pipelinehealthreceiver/internal/metadata"
)

// What the counters moved after the last periodic read is read once more
// at shutdown and handed on: at the shipped one-minute interval, a loss in
// the minute before a shutdown would otherwise never be sent.
func TestLastReadAtShutdown(t *testing.T) {
	var mu sync.Mutex
	body := first
	cfg := createDefaultConfig()
	cfg.URL = serve(t, &body, &mu)
	cfg.CollectionInterval = time.Hour // one periodic read: the one at start
	sink := new(consumertest.MetricsSink)
	r, err := NewFactory().CreateMetrics(context.Background(), receivertest.NewNopSettings(metadata.Type), cfg, sink)
	require.NoError(t, err)
	require.NoError(t, r.Start(context.Background(), componenttest.NewNopHost()))
	require.Eventually(t, func() bool { return len(sink.AllMetrics()) == 1 }, 10*time.Second, 10*time.Millisecond, "the read at start")

	mu.Lock()
	body = second
	mu.Unlock()
	require.NoError(t, r.Shutdown(context.Background()))
	all := sink.AllMetrics()
	require.Len(t, all, 2, "one more read at shutdown")
	got := points(t, all[1])
	assert.Equal(t, []point{{40, map[string]any{"exporter": "cloudwatch"}}}, got["otelcol_exporter_send_failed_metric_points"], "a loss after the last periodic read")
	assert.Equal(t, []point{{0, map[string]any{"receiver": "nvml"}}, {3, map[string]any{"receiver": "otlp", "transport": "http"}}},
		got["otelcol_receiver_refused_metric_points"], "counted from the periodic read, not again from zero")
}

// A receiver that never started does not read at shutdown (the collector
// shuts down components that failed to start, or whose start was never
// reached).
func TestNoReadAtShutdownWithoutStart(t *testing.T) {
	var reads atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		reads.Add(1)
		_, _ = w.Write([]byte(first))
	}))
	t.Cleanup(srv.Close)
	cfg := createDefaultConfig()
	cfg.URL = srv.URL + "/metrics"
	sink := new(consumertest.MetricsSink)
	r, err := NewFactory().CreateMetrics(context.Background(), receivertest.NewNopSettings(metadata.Type), cfg, sink)
	require.NoError(t, err)
	require.NoError(t, r.Shutdown(context.Background()))
	assert.Zero(t, reads.Load())
	assert.Empty(t, sink.AllMetrics())
}
