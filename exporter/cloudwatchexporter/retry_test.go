// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/translate"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
)

func TestRetryResendsOnlyWhatFailed(t *testing.T) {
	te := newTestExporter(t, false, func(cfg *Config) { cfg.MaxConcurrentRequests = 1 })
	// Three requests per flush; the second is throttled.
	te.server.SetFaults(cloudwatchtest.Faults{ThrottleEvery: 2})
	require.NoError(t, te.ConsumeMetrics(context.Background(), deltaBatch(2500, newest(), 1)))
	assertExactlyOnce(t, te.server.Datums(), 2500, 2500)
	// Requests: 1 ok, 2 throttled, 3 ok; the retry re-sends only request 2's
	// 1000 datums: request 4, throttled again, then request 5, ok. Nothing
	// accepted was sent again.
	assert.Equal(t, cloudwatchtest.Stats{Requests: 5, Accepted: 3, Throttled: 2}, te.server.Stats())
	assert.Equal(t, map[string]int64{"success": 3, "throttled": 2}, te.counter(t, "requests", "outcome"))
	assert.Equal(t, int64(2000), te.counter(t, "points_retried", "")[""])
}

func TestRecoveryIsExactUnderFaults(t *testing.T) {
	for name, faults := range map[string]cloudwatchtest.Faults{
		"throttling":          {ThrottleEvery: 3},
		"5xx":                 {ServerErrorEvery: 2},
		"dropped connections": {DropEvery: 4},
		"everything":          {ThrottleEvery: 5, ServerErrorEvery: 3, DropEvery: 7},
	} {
		t.Run(name, func(t *testing.T) {
			te := newTestExporter(t, true, func(cfg *Config) {
				cfg.MaxConcurrentRequests = 3
				cfg.QueueConfig.Get().NumConsumers = 2
			})
			te.server.SetFaults(faults)
			// Cumulative counters for 1200 series over 4 exports: the deltas
			// must add up to the last values, whatever was retried.
			start := pcommon.NewTimestampFromTime(time.Now().Add(-time.Hour))
			const series = 1200
			var want float64
			for step := 1; step <= 4; step++ {
				md := pmetric.NewMetrics()
				sum := newMetric(md, "bytes", "By").SetEmptySum()
				sum.SetIsMonotonic(true)
				sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
				ts := pcommon.NewTimestampFromTime(start.AsTime().Add(time.Duration(step) * time.Minute))
				for i := 0; i < series; i++ {
					dp := sum.DataPoints().AppendEmpty()
					dp.SetStartTimestamp(start)
					dp.SetTimestamp(ts)
					dp.SetIntValue(int64(step * (i + 1)))
					dp.Attributes().PutInt("series", int64(i))
				}
				require.NoError(t, te.ConsumeMetrics(context.Background(), md))
			}
			for i := 0; i < series; i++ {
				want += float64(4 * (i + 1))
			}
			require.Eventually(t, func() bool { return len(te.server.Datums()) >= 4*series }, 20*time.Second, 10*time.Millisecond)
			require.NoError(t, te.stop())
			assertExactlyOnce(t, te.server.Datums(), 4*series, want)
			st := te.server.Stats()
			assert.Positive(t, st.Throttled+st.ServerErrors+st.Dropped, "faults were injected")
		})
	}
}

func TestOutageRecovery(t *testing.T) {
	te := newTestExporter(t, true, nil)
	require.NoError(t, te.server.SetDown(true))
	require.NoError(t, te.ConsumeMetrics(context.Background(), deltaBatch(1500, newest(), 2)))
	assert.Eventually(t, func() bool { return te.counter(t, "requests", "outcome")["network_error"] > 0 }, 5*time.Second, 5*time.Millisecond)
	require.NoError(t, te.server.SetDown(false))
	require.Eventually(t, func() bool { return len(te.server.Datums()) >= 1500 }, 20*time.Second, 10*time.Millisecond)
	require.NoError(t, te.stop())
	assertExactlyOnce(t, te.server.Datums(), 1500, 3000)
}

// A request refused for what all its points share is sent again once, in
// two halves (in case one point alone was refused, see
// TestOnePointRefusedCostsOnlyItself); both refused, the points are
// dropped: three requests, and the export is not retried.
func TestRejectedRequestIsNotRetried(t *testing.T) {
	te := newTestExporter(t, false, nil)
	// To the server our points are 3 h in the future: it rejects the request.
	te.server.SetClock(func() time.Time { return time.Now().Add(-3 * time.Hour) })
	err := te.ConsumeMetrics(context.Background(), deltaBatch(10, newest(), 1))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "InvalidParameterValue")
	assert.Equal(t, cloudwatchtest.Stats{Requests: 3, Rejected: 3}, te.server.Stats(), "no retry")
	assert.Equal(t, map[string]int64{"rejected": 10}, te.counter(t, "points_dropped", "reason"))
	assert.Equal(t, map[string]int64{"rejected": 2, "rejected_split": 1}, te.counter(t, "requests", "outcome"))
}

// One data point CloudWatch refuses (a value the translation did not
// foresee) costs only itself: its request is halved, and the refused half
// again, until the point is alone; every other point lands once.
func TestOnePointRefusedCostsOnlyItself(t *testing.T) {
	te := newTestExporter(t, false, nil)
	md := gauges(600, 0, 0)
	bad := gauges(1, 0, 0)
	bad.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).SetName("refused")
	bad.ResourceMetrics().MoveAndAppendTo(md.ResourceMetrics())
	te.server.SetFaults(cloudwatchtest.Faults{RejectMetricName: "refused"})

	err := te.ConsumeMetrics(context.Background(), md)
	require.Error(t, err, "the refused point is reported (permanent)")
	assert.Contains(t, err.Error(), "InvalidParameterValue")
	assert.Len(t, te.server.Datums(), 600, "every other point landed")
	for _, d := range te.server.Datums() {
		assert.NotEqual(t, "refused", d.MetricName)
	}
	assert.Equal(t, map[string]int64{"rejected": 1}, te.counter(t, "points_dropped", "reason"))
	outcomes := te.counter(t, "requests", "outcome")
	assert.Equal(t, int64(1), outcomes["rejected"])
	assert.LessOrEqual(t, te.server.Stats().Requests, 1+2*11, "about two requests per halving, log2(601) halvings")
	assert.Positive(t, outcomes["rejected_split"])
}

func TestShutdownFlushesTheQueue(t *testing.T) {
	te := newTestExporter(t, true, nil)
	te.server.SetFaults(cloudwatchtest.Faults{Latency: 50 * time.Millisecond})
	for i := 0; i < 5; i++ {
		ts := pcommon.NewTimestampFromTime(time.Now().Add(time.Duration(i) * time.Second))
		require.NoError(t, te.ConsumeMetrics(context.Background(), deltaBatch(300, ts, 1)))
	}
	require.NoError(t, te.stop())
	assertExactlyOnce(t, te.server.Datums(), 1500, 1500)
}

func TestConcurrencyIsBounded(t *testing.T) {
	te := newTestExporter(t, false, func(cfg *Config) { cfg.MaxConcurrentRequests = 2 })
	te.server.SetFaults(cloudwatchtest.Faults{Latency: 20 * time.Millisecond})
	require.NoError(t, te.ConsumeMetrics(context.Background(), deltaBatch(6000, newest(), 1)))
	assert.Equal(t, 6, te.server.Stats().Accepted)
	assert.Equal(t, 2, te.server.MaxInFlight(), "six requests, two at a time")
}

func TestCumulativeStateTelemetry(t *testing.T) {
	te := newTestExporter(t, false, func(cfg *Config) { cfg.CumulativeState.MaxSeries = 2 })
	start := pcommon.NewTimestampFromTime(time.Now().Add(-time.Minute))
	for i, series := range []string{"a", "b", "c"} {
		md := cumulativeSum(start, pcommon.NewTimestampFromTime(time.Now().Add(time.Duration(i)*time.Millisecond)), 5, map[string]string{"s": series})
		require.NoError(t, te.ConsumeMetrics(context.Background(), md))
	}
	assert.Equal(t, int64(1), te.counter(t, "cumulative_evictions", "")[""])
	m, err := te.telemetry.GetMetric("otelcol_exporter_cloudwatch_cumulative_series")
	require.NoError(t, err)
	assert.Equal(t, int64(2), m.Data.(metricdata.Sum[int64]).DataPoints[0].Value)
}

// The queue does not take an export (full, or with block_on_overflow the
// caller stops waiting for room): its cumulative points are not converted,
// so the next export's deltas cover them.
func TestQueueRefusalUndoesTheConversion(t *testing.T) {
	for name, block := range map[string]bool{"queue full": false, "caller gave up waiting for room": true} {
		t.Run(name, func(t *testing.T) {
			te := newTestExporter(t, true, func(cfg *Config) {
				q := cfg.QueueConfig.Get()
				q.QueueSize, q.NumConsumers, q.BlockOnOverflow = 1, 1, block
			})
			require.NoError(t, te.server.SetDown(true))
			begin := time.Now().Add(-time.Minute)
			start := pcommon.NewTimestampFromTime(begin)
			point := func(i int, v int64) pmetric.Metrics {
				return cumulativeSum(start, pcommon.NewTimestampFromTime(begin.Add(time.Duration(i)*time.Second)), v, nil)
			}
			// 10 fills the queue (its only consumer keeps retrying it).
			require.NoError(t, te.ConsumeMetrics(context.Background(), point(1, 10)))
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			require.Error(t, te.ConsumeMetrics(ctx, point(2, 25)), "the queue refuses 25")

			require.NoError(t, te.server.SetDown(false))
			require.Eventually(t, func() bool { return len(te.server.Datums()) == 1 }, 10*time.Second, 5*time.Millisecond)
			require.Eventually(t, func() bool {
				return te.ConsumeMetrics(context.Background(), point(3, 40)) == nil
			}, 10*time.Second, 10*time.Millisecond)
			require.NoError(t, te.stop())
			// 10 since start, then 40-10: the refused interval is covered.
			assert.Equal(t, []float64{10, 30}, sentValues(te.server, "requests"))
		})
	}
}

// Unpaced by default; a throttling answer paces the requests (the gauge
// shows the pace), and nothing is lost or sent twice meanwhile.
func TestThrottlingPacesRequests(t *testing.T) {
	te := newTestExporter(t, false, func(cfg *Config) { cfg.MaxConcurrentRequests = 1 })
	pace := func() float64 {
		m, err := te.telemetry.GetMetric("otelcol_exporter_cloudwatch_request_rate_limit")
		require.NoError(t, err)
		return m.Data.(metricdata.Gauge[float64]).DataPoints[0].Value
	}
	require.NoError(t, te.ConsumeMetrics(context.Background(), deltaBatch(3000, newest(), 1)))
	assert.Zero(t, pace(), "no ceiling and no throttling: unpaced")

	te.server.SetFaults(cloudwatchtest.Faults{ThrottleEvery: 2})
	require.NoError(t, te.ConsumeMetrics(context.Background(), deltaBatch(2500, newest(), 2)))
	assert.Positive(t, pace(), "throttled: paced")
	datums := te.server.Datums()
	assert.Len(t, datums, 5500)
	assertExactlyOnce(t, datums[3000:], 2500, 2*2500)
}

func TestSubsetCopiesOnlyTheGivenPoints(t *testing.T) {
	md := pmetric.NewMetrics()
	for r := 0; r < 2; r++ {
		rm := md.ResourceMetrics().AppendEmpty()
		rm.Resource().Attributes().PutInt("r", int64(r))
		sm := rm.ScopeMetrics().AppendEmpty()
		sm.Scope().SetName("scope")
		g := sm.Metrics().AppendEmpty()
		g.SetName("g")
		for p := 0; p < 3; p++ {
			g.SetEmptyGauge()
		}
		for p := 0; p < 3; p++ {
			g.Gauge().DataPoints().AppendEmpty().SetIntValue(int64(10*r + p))
		}
		s := sm.Metrics().AppendEmpty()
		s.SetName("s")
		s.SetUnit("By")
		sum := s.SetEmptySum()
		sum.SetIsMonotonic(true)
		sum.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
		sum.DataPoints().AppendEmpty().SetIntValue(int64(100 + r))
	}
	out := subset(md, []translate.PointRef{{Resource: 1, Scope: 0, Metric: 0, Point: 2}, {Resource: 0, Scope: 0, Metric: 1, Point: 0}, {Resource: 1, Scope: 0, Metric: 0, Point: 0}, {Resource: 1, Scope: 0, Metric: 0, Point: 2}})

	require.Equal(t, 2, out.ResourceMetrics().Len())
	r0 := out.ResourceMetrics().At(0)
	v, _ := r0.Resource().Attributes().Get("r")
	assert.Equal(t, int64(0), v.Int())
	require.Equal(t, 1, r0.ScopeMetrics().At(0).Metrics().Len())
	s := r0.ScopeMetrics().At(0).Metrics().At(0)
	assert.Equal(t, "s", s.Name())
	assert.Equal(t, "By", s.Unit())
	assert.True(t, s.Sum().IsMonotonic())
	assert.Equal(t, pmetric.AggregationTemporalityDelta, s.Sum().AggregationTemporality())
	assert.Equal(t, int64(100), s.Sum().DataPoints().At(0).IntValue())

	r1 := out.ResourceMetrics().At(1)
	assert.Equal(t, "scope", r1.ScopeMetrics().At(0).Scope().Name())
	g := r1.ScopeMetrics().At(0).Metrics().At(0).Gauge().DataPoints()
	require.Equal(t, 2, g.Len(), "a repeated reference is copied once")
	assert.Equal(t, int64(10), g.At(0).IntValue())
	assert.Equal(t, int64(12), g.At(1).IntValue())
	assert.Equal(t, 3, out.DataPointCount())
}
