// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/metadatatest"
)

func (te *testExporter) dryRunGauge(t *testing.T) int64 {
	t.Helper()
	m, err := te.telemetry.GetMetric("otelcol_exporter_cloudwatch_dry_run")
	require.NoError(t, err)
	dps := m.Data.(metricdata.Gauge[int64]).DataPoints
	require.Len(t, dps, 1)
	return dps[0].Value
}

// A credentials endpoint that is slow, or fails once, at start: auto holds
// the data in the sending queue, keeps looking and sends everything to
// CloudWatch; it never becomes a dry run.
func TestAutoWaitsForSlowOrFailingCredentials(t *testing.T) {
	for name, creds := range map[string]*containerCredentials{
		"answers after 2.5 s": {firstDelay: 2500 * time.Millisecond},
		"fails once":          {failFirst: true},
	} {
		t.Run(name, func(t *testing.T) {
			te, served, logs := newObservedExporter(t, creds, func(cfg *Config) {
				cfg.OutputDestination = destinationAuto
			})
			require.NoError(t, te.ConsumeMetrics(context.Background(), deltaBatch(50, newest(), 2)))
			require.Eventually(t, func() bool { return len(te.server.Datums()) >= 50 }, 60*time.Second, 20*time.Millisecond)
			assert.Zero(t, te.dryRunGauge(t))
			require.NoError(t, te.stop())

			assertExactlyOnce(t, te.server.Datums(), 50, 100)
			assert.False(t, te.dryRun.Load())
			assert.Empty(t, logs.FilterMessageSnippet("dry run").All())
			assert.GreaterOrEqual(t, served.served.Load(), int32(1))
			assert.Equal(t, int64(50), te.counter(t, "datums_sent", "")[""])
		})
	}
}

type statusHost struct {
	component.Host
	events chan *componentstatus.Event
}

func (h *statusHost) Report(ev *componentstatus.Event) { h.events <- ev }

// Nothing configured: a dry run, said once at warn, shown by the dry_run
// gauge and the component status; printed datums are not counted as sent.
func TestAutoDryRunIsVisible(t *testing.T) {
	isolateAWS(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	cfg := testConfig()
	cfg.OutputDestination = destinationAuto
	cfg.QueueConfig = configoptional.None[exporterhelper.QueueBatchConfig]()
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tt.Shutdown(context.Background()) })
	set := metadatatest.NewSettings(tt)
	core, logs := observer.New(zapcore.InfoLevel)
	set.Logger = zap.New(core)
	exp, err := NewFactory().CreateMetrics(context.Background(), set, cfg)
	require.NoError(t, err)
	host := &statusHost{Host: componenttest.NewNopHost(), events: make(chan *componentstatus.Event, 4)}
	require.NoError(t, exp.Start(context.Background(), host))
	t.Cleanup(func() { _ = exp.Shutdown(context.Background()) })
	te := &testExporter{metricsExporter: exp.(*metricsExporter), telemetry: tt}

	require.NoError(t, te.ConsumeMetrics(context.Background(), gauges(3, 0, 0)))
	require.NoError(t, te.ConsumeMetrics(context.Background(), gauges(3, 0, 0)))

	assert.Equal(t, int64(1), te.dryRunGauge(t))
	assert.Empty(t, te.counter(t, "datums_sent", ""), "printed datums are not sent")
	warned := logs.FilterMessageSnippet("dry run").All()
	require.Len(t, warned, 1, "said once")
	assert.Equal(t, zapcore.WarnLevel, warned[0].Level)
	require.Len(t, host.events, 1, "reported once")
	ev := <-host.events
	assert.Equal(t, componentstatus.StatusRecoverableError, ev.Status())
	assert.ErrorContains(t, ev.Err(), "dry run")
}
