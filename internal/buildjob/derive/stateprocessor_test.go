// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derive

import (
	"context"
	"testing"
	"time"

	"github.com/gpubuild/otelcol-gpubuild/internal/buildjob/derivestate"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/extension"
)

// startProcessor starts an HTTP processor with its state in dir.
func startProcessor(t *testing.T, dir, journalDir string, next consumer.Metrics) (*testProcessor, extension.Extension) {
	t.Helper()
	ext := startFileStorage(t, dir)
	set := componenttest.NewNopTelemetrySettings()
	cfg := derivestate.DefaultConfig()
	cfg.Storage = &stateStorageID
	cfg.Journal.Directory = journalDir
	p := newTestProcessor(set, HTTPSpec{Output: *defaultOutput(), Cumulative: DefaultCumulativeConfig(), Telemetry: testTelemetry(set)}, cfg, next)
	require.NoError(t, p.Start(context.Background(), storageHost{Host: componenttest.NewNopHost(), ext: ext}))
	return p, ext
}

// The processor's baselines and unflushed counts survive SIGTERM and
// kill -9: the service's next cumulative point after the restart gives
// only what is new, and nothing counted before is lost.
func TestProcessorRestartNeitherRepeatsNorZeroes(t *testing.T) {
	for _, tc := range []struct {
		name          string
		kill, journal bool
	}{{"sigterm", false, false}, {"kill9", true, false}, {"sigterm journal", false, true}, {"kill9 journal", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			journalDir := ""
			if tc.journal {
				journalDir = dir
			}
			now := time.Now()
			start := now.Add(-10 * time.Minute) // the service ran before the collector
			first := new(consumertest.MetricsSink)
			p, ext := startProcessor(t, dir, journalDir, first)
			_, err := p.ProcessMetrics(ctx, httpHistogram(start, now, 10))
			require.NoError(t, err)
			if tc.kill {
				p.emitter.stopLoop()
				<-p.emitter.loopDone
				closeAsKilled(t, p.state)
			} else {
				require.NoError(t, p.Shutdown(ctx))
			}
			require.NoError(t, ext.Shutdown(ctx))

			second := new(consumertest.MetricsSink)
			p, ext = startProcessor(t, dir, journalDir, second)
			_, err = p.ProcessMetrics(ctx, httpHistogram(start, now.Add(time.Minute), 15))
			require.NoError(t, err)
			require.NoError(t, p.Shutdown(ctx))
			require.NoError(t, ext.Shutdown(ctx))
			assert.Equal(t, int64(15), landed(metricAPIRequests, nil, first, second))
		})
	}
}
