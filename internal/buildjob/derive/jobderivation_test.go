// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derive

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
)

type connectorPair struct {
	traces connector.Traces
	logs   connector.Logs
	tel    *componenttest.Telemetry
}

func newConnectorPair(t *testing.T, f connector.Factory, id component.ID, cfg *jobSettings, next consumer.Metrics) connectorPair {
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	set := connectortest.NewNopSettings(testType)
	set.ID = id
	set.TelemetrySettings = tel.NewTelemetrySettings()
	tc, err := f.CreateTracesToMetrics(context.Background(), set, cfg, next)
	require.NoError(t, err)
	lc, err := f.CreateLogsToMetrics(context.Background(), set, cfg, next)
	require.NoError(t, err)
	return connectorPair{traces: tc, logs: lc, tel: tel}
}

func (p connectorPair) start(t *testing.T) {
	require.NoError(t, p.traces.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, p.logs.Start(context.Background(), componenttest.NewNopHost()))
}

// The collector creates one instance per signal; a run reported through the
// traces instance and the logs instance is still counted once, and counts
// are emitted when the last instance shuts down.
func TestConnectorInstancesShareRuns(t *testing.T) {
	ctx := context.Background()
	next := new(consumertest.MetricsSink)
	p := newConnectorPair(t, testConnectorFactory(), component.NewID(testType), testConfig(), next)
	p.start(t)
	assert.False(t, p.traces.Capabilities().MutatesData)

	svc := newTestService(t, newOTLPSink(t))
	start := time.Now().Add(-time.Minute)
	svc.status("job-1", running, start)
	svc.status("job-1", completed, start.Add(40*time.Second))
	svc.jobSpan("job-1", start, start.Add(40*time.Second), codes.Unset)
	svc.stageSpan("job-1", "gpu_build", start, start.Add(30*time.Second), codes.Unset)
	require.NoError(t, p.logs.ConsumeLogs(ctx, svc.logs()))
	require.NoError(t, p.traces.ConsumeTraces(ctx, svc.traces()))

	// The records counted the run; the job span, arriving after, added nothing.
	assertCounter(t, p.tel, "otelcol_buildjob_records_deduplicated", []metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())

	require.NoError(t, p.traces.Shutdown(ctx))
	assert.Empty(t, next.AllMetrics(), "the logs instance is still running")
	require.NoError(t, p.logs.Shutdown(ctx))
	require.Len(t, next.AllMetrics(), 1)
	ps := points(next.AllMetrics()[0])
	assert.Equal(t, int64(1), one(t, ps, metricBuildJobs, attrs("build.result", "success")).value)
	assert.Equal(t, 40.0, one(t, ps, metricBuildJobDuration, attrs("build.result", "success")).sum)
	assert.Equal(t, int64(1), one(t, ps, metricBuildStageRuns, attrs("build.stage", "gpu_build", "build.result", "success")).value)

}

func TestConnectorFlushesEveryInterval(t *testing.T) {
	ctx := context.Background()
	next := new(consumertest.MetricsSink)
	cfg := testConfig()
	cfg.MetricsFlushInterval = 20 * time.Millisecond
	p := newConnectorPair(t, testConnectorFactory(), component.NewID(testType), cfg, next)
	p.start(t)
	defer func() {
		require.NoError(t, p.traces.Shutdown(ctx))
		require.NoError(t, p.logs.Shutdown(ctx))
	}()

	svc := newTestService(t, newOTLPSink(t))
	svc.request("POST", "/_build", 202, time.Now().Add(-time.Second), time.Now())
	require.NoError(t, p.traces.ConsumeTraces(ctx, svc.traces()))
	require.Eventually(t, func() bool { return len(next.AllMetrics()) > 0 }, 5*time.Second, 5*time.Millisecond)
	ps := points(next.AllMetrics()[0])
	assert.Equal(t, int64(1), total(ps, metricAPIRequests, nil))
}

func TestConnectorReportsSkippedAndEvicted(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig()
	cfg.MaxActiveJobs = 1
	p := newConnectorPair(t, testConnectorFactory(), component.NewID(testType), cfg, new(consumertest.MetricsSink))
	p.start(t)

	svc := newTestService(t, newOTLPSink(t))
	now := time.Now()
	svc.span("index_build", now, now.Add(time.Second), spanOpts{attrs: []attribute.KeyValue{attribute.Int("build.job.id", 1)}})
	svc.jobSpan("job-1", now, now.Add(time.Second), codes.Unset, attribute.String("build.job.result", "meh"))
	require.NoError(t, p.traces.ConsumeTraces(ctx, svc.traces()), "malformed spans never fail the batch")
	svc.status("job-1", running, now)
	svc.status("job-2", running, now)
	require.NoError(t, p.logs.ConsumeLogs(ctx, svc.logs()))

	assertCounter(t, p.tel, "otelcol_buildjob_records_skipped", []metricdata.DataPoint[int64]{
		{Value: 1, Attributes: attribute.NewSet(attribute.String("reason", "wrong_type"))},
		{Value: 1, Attributes: attribute.NewSet(attribute.String("reason", "invalid_value"))},
	}, metricdatatest.IgnoreTimestamp())
	assertCounter(t, p.tel, "otelcol_buildjob_runs_evicted", []metricdata.DataPoint[int64]{
		{Value: 1, Attributes: attribute.NewSet(attribute.String("state", "active"))},
	}, metricdatatest.IgnoreTimestamp())
	require.NoError(t, p.traces.Shutdown(ctx))
	require.NoError(t, p.logs.Shutdown(ctx))
}
