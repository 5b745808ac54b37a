// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package buildjobprocessor

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
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gpubuild/otelcol-gpubuild/connector/buildjobconnector"
)

// collectorHost hands out the factories of one collector, as the service's
// host does.
type collectorHost struct {
	component.Host
	connectors connector.Factory
}

func (h collectorHost) GetFactory(kind component.Kind, typ component.Type) component.Factory {
	if kind == component.KindConnector && typ == h.connectors.Type() {
		return h.connectors
	}
	return nil
}

// startBoth creates a buildjob connector (api_requests_from_spans as given)
// and a buildjob processor in one collector, starts the processor, sends it
// one HTTP server histogram of 5 requests (start time before the
// processor, so counted from there) and stops it. It returns the metric
// names the processor handed on and its log.
func startBoth(t *testing.T, apiFromSpans bool) (names []string, logs *observer.ObservedLogs) {
	t.Helper()
	ctx := context.Background()
	cf := buildjobconnector.NewFactory()
	ccfg := cf.CreateDefaultConfig().(*buildjobconnector.Config)
	ccfg.APIRequestsFromSpans = apiFromSpans
	cset := connectortest.NewNopSettings(cf.Type())
	cset.ID = component.NewIDWithName(cf.Type(), "spans")
	conn, err := cf.CreateTracesToMetrics(ctx, cset, ccfg, consumertest.NewNop())
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, conn.Shutdown(ctx)) })

	pf := NewFactory()
	pset := processortest.NewNopSettings(pf.Type())
	core, logs := observer.New(zap.InfoLevel)
	pset.Logger = zap.New(core)
	sink := &consumertest.MetricsSink{}
	proc, err := pf.CreateMetrics(ctx, pset, pf.CreateDefaultConfig(), sink)
	require.NoError(t, err)
	require.NoError(t, proc.Start(ctx, collectorHost{Host: componenttest.NewNopHost(), connectors: cf}))

	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "builder")
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("http.server.request.duration")
	m.SetUnit("s")
	h := m.SetEmptyHistogram()
	h.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	dp := h.DataPoints().AppendEmpty()
	now := time.Now()
	dp.SetStartTimestamp(pcommon.NewTimestampFromTime(now.Add(-time.Minute)))
	dp.SetTimestamp(pcommon.NewTimestampFromTime(now))
	dp.SetCount(5)
	dp.SetSum(1)
	dp.ExplicitBounds().FromRaw([]float64{1})
	dp.BucketCounts().FromRaw([]uint64{5, 0})
	dp.Attributes().PutStr("http.request.method", "POST")
	dp.Attributes().PutStr("http.route", "/_build")
	dp.Attributes().PutInt("http.response.status_code", 200)
	require.NoError(t, proc.ConsumeMetrics(ctx, md))
	require.NoError(t, proc.Shutdown(ctx))

	for _, got := range sink.AllMetrics() {
		for i := 0; i < got.ResourceMetrics().Len(); i++ {
			sms := got.ResourceMetrics().At(i).ScopeMetrics()
			for j := 0; j < sms.Len(); j++ {
				for k := 0; k < sms.At(j).Metrics().Len(); k++ {
					names = append(names, sms.At(j).Metrics().At(k).Name())
				}
			}
		}
	}
	return names, logs
}

// Beside a connector that derives api.requests from spans, the processor
// stands down: it passes the histogram on, derives nothing, and says why,
// naming both components.
func TestStandsDownBesideConnectorCountingAPIRequestsFromSpans(t *testing.T) {
	names, logs := startBoth(t, true)
	assert.Contains(t, names, "http.server.request.duration", "passed through")
	assert.NotContains(t, names, "api.requests", "counted by the connector, not here too")
	warned := logs.FilterMessageSnippet("derives nothing").All()
	require.Len(t, warned, 1)
	assert.Equal(t, zapcore.WarnLevel, warned[0].Level)
	assert.Contains(t, warned[0].Message, `processor "buildjob"`)
	assert.Contains(t, warned[0].Message, `connector "buildjob/spans"`)
	assert.Contains(t, warned[0].Message, "api_requests_from_spans")
}

// Beside a connector that counts only jobs, the processor derives
// api.requests from the histograms.
func TestDerivesBesideConnectorCountingJobsOnly(t *testing.T) {
	names, logs := startBoth(t, false)
	assert.Contains(t, names, "http.server.request.duration")
	assert.Contains(t, names, "api.requests")
	assert.Empty(t, logs.FilterMessageSnippet("derives nothing").All())
}
