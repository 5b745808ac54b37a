// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlreceiver

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gpubuild/otelcol-gpubuild/receiver/nvmlreceiver/internal/metadata"
)

func TestRetryFromLibraryMissingToPresent(t *testing.T) {
	srv := newMockServer()
	attempts := 0
	present := false
	load := func() (library, error) {
		attempts++
		if !present {
			return nil, errNoLibrary
		}
		return srv, nil
	}
	cfg := defaultTestConfig()
	cfg.InitRetryInterval = time.Minute
	cfg.InitRetryMaxInterval = time.Minute // a fixed interval: the back-off has its own test
	env := newTestEnv(t, cfg, load)
	assert.Equal(t, 1, attempts, "start tries once")
	assert.Equal(t, 1, countLogs(env.logs, "NVML is not available"))

	// Scrapes before the retry interval neither load nor emit.
	for range 5 {
		env.clock.advance(10 * time.Second)
		md, err := env.scrape(t)
		require.NoError(t, err, "a missing library is not a scrape error")
		assert.Equal(t, 0, md.ResourceMetrics().Len())
	}
	assert.Equal(t, 1, attempts)

	env.clock.advance(10 * time.Second) // 60 s after start
	md, err := env.scrape(t)
	require.NoError(t, err)
	assert.Equal(t, 0, md.ResourceMetrics().Len())
	assert.Equal(t, 2, attempts)
	assert.Equal(t, 1, countLogs(env.logs, "NVML is not available"), "the warning is not repeated")

	// The driver appears (e.g. installed after the collector started).
	present = true
	env.clock.advance(30 * time.Second)
	md, err = env.scrape(t)
	require.NoError(t, err)
	assert.Equal(t, 2, attempts, "not yet due")
	assert.Equal(t, 0, md.ResourceMetrics().Len())

	env.clock.advance(30 * time.Second)
	md, err = env.scrape(t)
	require.NoError(t, err)
	assert.Equal(t, 3, attempts)
	assert.Equal(t, 8, md.ResourceMetrics().Len(), "GPUs are enumerated once NVML loads")
	assert.Equal(t, 1, countLogs(env.logs, "NVML loaded"))

	env.clock.advance(2 * time.Minute)
	_, err = env.scrape(t)
	require.NoError(t, err)
	assert.Equal(t, 3, attempts, "no reload once loaded")
}

func TestNoGPUFoundIsRetried(t *testing.T) {
	srv := newMockServer()
	count := 0
	srv.DeviceGetCountFunc = func() (int, nvml.Return) { return count, nvml.SUCCESS }
	env := newTestEnv(t, defaultTestConfig(), loaderOf(srv))
	md, err := env.scrape(t)
	require.NoError(t, err)
	assert.Equal(t, 0, md.ResourceMetrics().Len())
	assert.Equal(t, 1, countLogs(env.logs, "NVML loaded but found no GPU"))

	count = 2
	env.clock.advance(time.Minute)
	md, err = env.scrape(t)
	require.NoError(t, err)
	assert.Equal(t, 2, md.ResourceMetrics().Len())
}

func TestShutdownOnlyAfterSuccessfulInit(t *testing.T) {
	srv := newMockServer()
	shutdowns := 0
	srv.ShutdownFunc = func() nvml.Return { shutdowns++; return nvml.SUCCESS }

	set := receivertest.NewNopSettings(metadata.Type)
	missing := newGPUScraperWith(defaultTestConfig(), set, func() (library, error) { return nil, errNoLibrary }, nil, time.Now)
	require.NoError(t, missing.start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, missing.shutdown(context.Background()))

	loaded := newGPUScraperWith(defaultTestConfig(), set, loaderOf(srv), nil, time.Now)
	require.NoError(t, loaded.start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, loaded.shutdown(context.Background()))
	assert.Equal(t, 1, shutdowns)
}

// TestRealLibraryMissing goes through go-nvml's real loader with a library
// path that does not exist, so it exercises the failed-dlopen path even on
// a machine with a GPU. Calling anything but Init after that failure would
// abort the test binary.
func TestRealLibraryMissing(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	set := receivertest.NewNopSettings(metadata.Type)
	set.Logger = zap.New(core)
	cfg := createDefaultConfig()
	cfg.CollectionInterval = 20 * time.Millisecond
	cfg.InitialDelay = 0
	cfg.InitRetryInterval = 50 * time.Millisecond
	cfg.InitRetryMaxInterval = 50 * time.Millisecond

	s := newGPUScraperWith(cfg, set, newSystemLoader(nvml.WithLibraryPath(filepath.Join(t.TempDir(), "libnvidia-ml.so.1"))), nil, time.Now)
	for range 10 {
		s.initNVML()
	}
	require.Nil(t, s.lib)

	// The whole receiver, as the collector runs it, for several intervals.
	sink := new(consumertest.MetricsSink)
	rcv, err := newReceiver(cfg, set, sink, s)
	require.NoError(t, err)
	require.NoError(t, rcv.Start(context.Background(), componenttest.NewNopHost()))
	require.Eventually(t, func() bool { return len(sink.AllMetrics()) >= 5 }, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, rcv.Shutdown(context.Background()))
	assert.Equal(t, 0, sink.DataPointCount())
	assert.Equal(t, 1, countLogs(logs, "NVML is not available"))
}
