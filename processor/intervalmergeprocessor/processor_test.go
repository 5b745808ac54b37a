// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package intervalmergeprocessor

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/gpubuild/otelcol-gpubuild/processor/intervalmergeprocessor/internal/metadata"
)

func deltaJobs(instance string, v int64) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "build")
	rm.Resource().Attributes().PutStr("service.instance.id", instance)
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("build.jobs")
	s := m.SetEmptySum()
	s.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	s.SetIsMonotonic(true)
	s.DataPoints().AppendEmpty().SetIntValue(v)
	return md
}

func start(t *testing.T, interval time.Duration, next consumer.Metrics) *mergeProcessor {
	t.Helper()
	cfg := createDefaultConfig()
	cfg.Interval = interval
	p, err := newMergeProcessor(processortest.NewNopSettings(metadata.Type), cfg, next)
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	return p
}

func TestRequestIsAcknowledgedOnlyAfterItsIntervalWasHandedOn(t *testing.T) {
	sink := &consumertest.MetricsSink{}
	p := start(t, 300*time.Millisecond, sink)

	var returned atomic.Int32
	errs := make(chan error, 20)
	for i := range 20 {
		go func() {
			errs <- p.ConsumeMetrics(context.Background(), deltaJobs(string(rune('a'+i)), 1))
			returned.Add(1)
		}()
	}
	for range 20 {
		require.NoError(t, <-errs)
		// When a call returns, what it sent is already with the next consumer.
		var total int64
		for _, md := range sink.AllMetrics() {
			total += sumOf(md)
		}
		assert.GreaterOrEqual(t, total, int64(returned.Load()))
	}
	var total int64
	for _, md := range sink.AllMetrics() {
		total += sumOf(md)
	}
	assert.Equal(t, int64(20), total)
	assert.LessOrEqual(t, len(sink.AllMetrics()), 2, "20 workers' requests in one or two flushes, not 20")
}

func sumOf(md pmetric.Metrics) int64 {
	var total int64
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		sms := md.ResourceMetrics().At(i).ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			for k := 0; k < sms.At(j).Metrics().Len(); k++ {
				dps := sms.At(j).Metrics().At(k).Sum().DataPoints()
				for l := 0; l < dps.Len(); l++ {
					total += dps.At(l).IntValue()
				}
			}
		}
	}
	return total
}

func TestRefusedIntervalRefusesItsRequests(t *testing.T) {
	refusal := errors.New("queue full")
	p := start(t, 50*time.Millisecond, consumertest.NewErr(refusal))
	err := p.ConsumeMetrics(context.Background(), deltaJobs("w", 1))
	require.ErrorIs(t, err, refusal, "the sender must retry what the exporter did not take")
}

func TestShutdownHandsOnTheOpenInterval(t *testing.T) {
	sink := &consumertest.MetricsSink{}
	cfg := createDefaultConfig()
	cfg.Interval = time.Hour
	p, err := newMergeProcessor(processortest.NewNopSettings(metadata.Type), cfg, sink)
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))
	done := make(chan error, 1)
	go func() { done <- p.ConsumeMetrics(context.Background(), deltaJobs("w", 7)) }()
	require.Eventually(t, func() bool { p.mu.Lock(); defer p.mu.Unlock(); return !p.cur.iv.Empty() }, 5*time.Second, 5*time.Millisecond)
	require.NoError(t, p.Shutdown(context.Background()))
	require.NoError(t, <-done)
	require.Len(t, sink.AllMetrics(), 1)
	assert.Equal(t, int64(7), sumOf(sink.AllMetrics()[0]))
	assert.Error(t, p.ConsumeMetrics(context.Background(), deltaJobs("w", 1)), "refused after shutdown")
}
