// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package buildjobconnector

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
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/gpubuild/otelcol-gpubuild/connector/buildjobconnector/internal/metadata"
)

// instances are the traces and logs instances the collector creates for
// one connector id.
type instances struct {
	traces connector.Traces
	logs   connector.Logs
}

func newInstances(t *testing.T, f connector.Factory, name string, next *consumertest.MetricsSink) instances {
	t.Helper()
	set := connectortest.NewNopSettings(metadata.Type)
	set.ID = component.NewIDWithName(metadata.Type, name)
	cfg := f.CreateDefaultConfig()
	tc, err := f.CreateTracesToMetrics(context.Background(), set, cfg, next)
	require.NoError(t, err)
	lc, err := f.CreateLogsToMetrics(context.Background(), set, cfg, next)
	require.NoError(t, err)
	return instances{traces: tc, logs: lc}
}

func (i instances) start(t *testing.T) {
	t.Helper()
	require.NoError(t, i.traces.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, i.logs.Start(context.Background(), componenttest.NewNopHost()))
}

// jobRecords are job-1's status records as the build service logs them:
// RUNNING at start, COMPLETED at end.
func jobRecords(start, end time.Time) plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", "vector-index-build")
	lrs := rl.ScopeLogs().AppendEmpty().LogRecords()
	for _, r := range []struct {
		status string
		at     time.Time
	}{{"RUNNING", start}, {"COMPLETED", end}} {
		lr := lrs.AppendEmpty()
		lr.SetTimestamp(pcommon.NewTimestampFromTime(r.at))
		lr.Attributes().PutStr("build.job.id", "job-1")
		lr.Attributes().PutStr("build.job.status", r.status)
	}
	return ld
}

// jobSpan is job-1's run as a span.
func jobSpan(start, end time.Time) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "vector-index-build")
	sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetName("index_build")
	sp.SetTraceID(pcommon.TraceID{1})
	sp.SetSpanID(pcommon.SpanID{1})
	sp.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
	sp.SetEndTimestamp(pcommon.NewTimestampFromTime(end))
	sp.Attributes().PutStr("build.job.id", "job-1")
	return td
}

// buildJobs is the total of build.jobs in what next received.
func buildJobs(next *consumertest.MetricsSink) int64 {
	var n int64
	for _, md := range next.AllMetrics() {
		rms := md.ResourceMetrics()
		for i := range rms.Len() {
			sms := rms.At(i).ScopeMetrics()
			for j := range sms.Len() {
				ms := sms.At(j).Metrics()
				for k := range ms.Len() {
					if m := ms.At(k); m.Name() == "build.jobs" && m.Type() == pmetric.MetricTypeSum {
						for p := range m.Sum().DataPoints().Len() {
							n += m.Sum().DataPoints().At(p).IntValue()
						}
					}
				}
			}
		}
	}
	return n
}

func TestInstancesShutDownWithoutStart(t *testing.T) {
	i := newInstances(t, NewFactory(), "", new(consumertest.MetricsSink))
	require.NoError(t, i.logs.Shutdown(context.Background()))
	require.NoError(t, i.traces.Shutdown(context.Background()))
}

// The collector creates one instance per signal; a run reported through the
// logs instance and again through the traces instance is counted once, and
// what was derived is emitted when the last instance shuts down.
func TestInstancesOfOneIDShareTheirRuns(t *testing.T) {
	ctx := context.Background()
	next := new(consumertest.MetricsSink)
	i := newInstances(t, NewFactory(), "", next)
	i.start(t)
	assert.False(t, i.traces.Capabilities().MutatesData)
	start := time.Now().Add(-time.Minute)
	end := start.Add(40 * time.Second)
	require.NoError(t, i.logs.ConsumeLogs(ctx, jobRecords(start, end)))
	require.NoError(t, i.traces.ConsumeTraces(ctx, jobSpan(start, end)))

	require.NoError(t, i.traces.Shutdown(ctx))
	assert.Empty(t, next.AllMetrics(), "the logs instance still runs")
	require.NoError(t, i.logs.Shutdown(ctx))
	assert.Equal(t, int64(1), buildJobs(next))
}

// Two connector ids of one factory keep apart: each counts the run it was
// given.
func TestConnectorIDsAreIndependent(t *testing.T) {
	ctx := context.Background()
	f := NewFactory()
	nextA, nextB := new(consumertest.MetricsSink), new(consumertest.MetricsSink)
	a, b := newInstances(t, f, "a", nextA), newInstances(t, f, "b", nextB)
	a.start(t)
	b.start(t)
	start := time.Now().Add(-time.Minute)
	td := jobSpan(start, start.Add(40*time.Second))
	require.NoError(t, a.traces.ConsumeTraces(ctx, td))
	require.NoError(t, b.traces.ConsumeTraces(ctx, td))
	for _, i := range []instances{a, b} {
		require.NoError(t, i.traces.Shutdown(ctx))
		require.NoError(t, i.logs.Shutdown(ctx))
	}
	assert.Equal(t, int64(1), buildJobs(nextA))
	assert.Equal(t, int64(1), buildJobs(nextB))
}
