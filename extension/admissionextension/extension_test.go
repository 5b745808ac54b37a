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
	"go.opentelemetry.io/collector/extension/extensiontest"
)

// The HTTP middleware holds a request before its handler (which reads the
// body) while the places are taken, and refuses with a retryable 503 once
// the wait is over.
func TestHTTPRequestsWaitThenAreRefused(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.MaxInFlight, cfg.MaxWaiting, cfg.WaitTimeout = 1, 1, 200*time.Millisecond
	ext, err := NewFactory().Create(context.Background(), extensiontest.NewNopSettings(NewFactory().Type()), cfg)
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
	close(unblock)
	assert.Equal(t, http.StatusOK, <-first)
}

func TestConfigValidateNamesTheField(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	require.NoError(t, cfg.Validate())
	cfg.MaxInFlight = 0
	assert.ErrorContains(t, cfg.Validate(), "max_in_flight")
}
