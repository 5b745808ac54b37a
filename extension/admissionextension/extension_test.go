// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package admissionextension

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/gpubuild/otelcol-gpubuild/extension/admissionextension/internal/metadatatest"
)

// The HTTP middleware holds a request before its handler (which reads the
// body) while the places are taken, and refuses with a retryable 503 once
// the wait is over.
func TestHTTPRequestsWaitThenAreRefused(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.MaxInFlight, cfg.MaxWaiting, cfg.WaitTimeout = 1, 1, 200*time.Millisecond
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tt.Shutdown(context.Background()) })
	ext, err := NewFactory().Create(context.Background(), metadatatest.NewSettings(tt), cfg)
	require.NoError(t, err)
	wrap, err := ext.(*admissionExtension).GetHTTPHandler(context.Background())
	require.NoError(t, err)

	entered := make(chan struct{}, 4)
	unblock := make(chan struct{})
	h, err := wrap(context.Background(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		entered <- struct{}{}
		<-unblock
		w.WriteHeader(http.StatusOK)
	}))
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	defer srv.Close()

	first := make(chan int, 1)
	go func() {
		resp, err := http.Post(srv.URL, "application/x-protobuf", nil)
		if err == nil {
			_ = resp.Body.Close()
			first <- resp.StatusCode
		}
	}()
	<-entered
	resp, err := http.Post(srv.URL, "application/x-protobuf", nil)
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "no place within wait_timeout")
	assert.Equal(t, "1", resp.Header.Get("Retry-After"))
	assert.Empty(t, entered, "the refused request never reached the handler")
	metadatatest.AssertEqualAdmissionRefusedRequests(t, tt, []metricdata.DataPoint[int64]{
		{Value: 1, Attributes: attribute.NewSet(attribute.String("reason", "busy"))},
	}, metricdatatest.IgnoreTimestamp())
	close(unblock)
	assert.Equal(t, http.StatusOK, <-first)
}

func TestConfigValidateNamesTheField(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	require.NoError(t, cfg.Validate())
	cfg.MaxInFlight = 0
	assert.ErrorContains(t, cfg.Validate(), "max_in_flight")

	cfg = createDefaultConfig().(*Config)
	cfg.Memory.LimitMiB, cfg.Memory.SpikeLimitMiB = 100, 100
	assert.ErrorContains(t, cfg.Validate(), "memory.spike_limit_mib")
	cfg.Memory.SpikeLimitMiB = 0
	require.NoError(t, cfg.Validate(), "0: 20 %% of limit_mib")
	cfg.Memory.CheckInterval = -time.Second
	assert.ErrorContains(t, cfg.Validate(), "memory.check_interval")
	cfg = createDefaultConfig().(*Config)
	cfg.Memory.MinGCIntervalWhenSoftLimited = 0
	assert.ErrorContains(t, cfg.Validate(), "memory.min_gc_interval_when_soft_limited")
}
