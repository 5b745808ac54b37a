// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlreceiver

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/gpubuild/otelcol-gpubuild/receiver/nvmlreceiver/internal/metadata"
)

// TestWithoutNVMLScrapesFollowInitRetries runs the whole receiver on the
// real clock without NVML: every scrape but the first is an NVML attempt,
// so scrapes follow the attempts (init_retry_interval, backing off up to
// init_retry_max_interval) whether collection_interval is shorter or longer.
func TestWithoutNVMLScrapesFollowInitRetries(t *testing.T) {
	for name, tc := range map[string]struct{ collection, retry time.Duration }{
		"collection_interval shorter": {collection: 5 * time.Millisecond, retry: 100 * time.Millisecond},
		"collection_interval longer":  {collection: time.Hour, retry: 20 * time.Millisecond},
	} {
		t.Run(name, func(t *testing.T) {
			var attempts atomic.Int64
			load := func() (library, error) { attempts.Add(1); return nil, errNoLibrary }
			cfg := defaultTestConfig()
			cfg.CollectionInterval = tc.collection
			cfg.InitialDelay = 0
			cfg.InitRetryInterval = tc.retry
			set := receivertest.NewNopSettings(metadata.Type)
			sink := new(consumertest.MetricsSink)
			rcv, err := newReceiver(cfg, set, sink, newGPUScraperWith(cfg, set, load, nil, time.Now))
			require.NoError(t, err)
			require.NoError(t, rcv.Start(context.Background(), componenttest.NewNopHost()))
			require.Eventually(t, func() bool { return attempts.Load() >= 4 }, 10*time.Second, 5*time.Millisecond)
			require.NoError(t, rcv.Shutdown(context.Background()))

			// Start makes one attempt; the first scrape may come before
			// the next is due, every later one is woken for an attempt.
			scrapes := int64(len(sink.AllMetrics()))
			assert.LessOrEqual(t, scrapes, attempts.Load(), "no scrape between attempts")
			assert.GreaterOrEqual(t, scrapes, attempts.Load()-1, "every attempt after start is a scrape")
			assert.Zero(t, sink.DataPointCount())
		})
	}
}

// TestScrapeCadenceThroughTheController drives the real scraperhelper
// controller on a manual clock: without NVML one timer waits for the next
// attempt and nothing scrapes in between; once a GPU is found, points
// arrive every collection_interval from that scrape on.
func TestScrapeCadenceThroughTheController(t *testing.T) {
	cfg := defaultTestConfig()
	r := startWithoutNVML(t, cfg)
	c, t0, sink := r.clock, r.t0, r.sink

	// The controller scrapes once at start; sink has it only after the
	// scraper re-armed.
	awaitScrapes(t, sink, 1)
	for range 5 {
		assert.Equal(t, []time.Time{t0.Add(cfg.InitRetryInterval)}, c.pending(), "one timer, for the next attempt")
		c.advance(cfg.CollectionInterval)
	}
	// No timer fired, so the controller had no tick to scrape on.
	assert.Len(t, sink.AllMetrics(), 1)

	r.present.Store(true)
	c.advance(cfg.InitRetryInterval - 5*cfg.CollectionInterval)
	for k := range 4 {
		awaitScrapes(t, sink, 2+k)
		want := t0.Add(cfg.InitRetryInterval + time.Duration(k)*cfg.CollectionInterval)
		assert.Equal(t, pcommon.NewTimestampFromTime(want), pointTime(t, sink.AllMetrics()[1+k]), "scrape %d", k)
		assert.Equal(t, []time.Time{want.Add(cfg.CollectionInterval)}, c.pending())
		c.advance(cfg.CollectionInterval)
	}
}

// pacedReceiver is a receiver driven by the real scraperhelper controller
// on fake timers, whose NVML loads once present is set.
type pacedReceiver struct {
	clock   *fakeTimers
	t0      time.Time
	present atomic.Bool
	sink    *consumertest.MetricsSink
}

func startWithoutNVML(t *testing.T, cfg *Config) *pacedReceiver {
	t.Helper()
	r := &pacedReceiver{clock: newFakeTimers(), sink: new(consumertest.MetricsSink)}
	r.t0 = r.clock.now()
	srv := newMockServer()
	load := func() (library, error) {
		if !r.present.Load() {
			return nil, errNoLibrary
		}
		return srv, nil
	}
	cfg.InitialDelay = 0
	set := receivertest.NewNopSettings(metadata.Type)
	rcv, err := newPacedReceiver(cfg, set, r.sink, newGPUScraperWith(cfg, set, load, nil, r.clock.now), r.clock.clock())
	require.NoError(t, err)
	require.NoError(t, rcv.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, rcv.Shutdown(context.Background())) })
	return r
}

func awaitScrapes(t *testing.T, sink *consumertest.MetricsSink, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return len(sink.AllMetrics()) >= n }, 10*time.Second, time.Millisecond)
	require.Len(t, sink.AllMetrics(), n)
}

// pointTime is the time of a scrape's temperature points, which all GPUs
// share.
func pointTime(t *testing.T, md pmetric.Metrics) pcommon.Timestamp {
	t.Helper()
	require.Positive(t, md.ResourceMetrics().Len())
	m, ok := findMetric(md.ResourceMetrics().At(0), "hw.temperature")
	require.True(t, ok)
	require.Positive(t, dataPoints(m).Len())
	return dataPoints(m).At(0).Timestamp()
}
