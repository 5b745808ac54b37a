// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derive

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// errQueueFull is what exporterhelper returns when its sending queue is full
// and does not block: a plain, retryable error.
var errQueueFull = errors.New("sending queue is full")

// scriptedConsumer answers its calls with script in order (nil accepts),
// then accepts everything. It keeps what it accepted. meanwhile, if set,
// runs at the start of the next call, as a batch arriving while a flush is
// on its way.
type scriptedConsumer struct {
	mu        sync.Mutex
	script    []error
	meanwhile func()
	// emptiesRefused: it empties what it refuses, as a consumer that owns
	// what it is offered may (dropping the points it cannot take).
	emptiesRefused bool
	accepted       []pmetric.Metrics
}

func (*scriptedConsumer) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (c *scriptedConsumer) ConsumeMetrics(_ context.Context, md pmetric.Metrics) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.meanwhile != nil {
		c.meanwhile()
		c.meanwhile = nil
	}
	if len(c.script) > 0 {
		err := c.script[0]
		c.script = c.script[1:]
		if err != nil {
			if c.emptiesRefused {
				md.ResourceMetrics().RemoveIf(func(pmetric.ResourceMetrics) bool { return true })
			}
			return err
		}
	}
	c.accepted = append(c.accepted, md)
	return nil
}

func (c *scriptedConsumer) acceptedPoints() [][]point {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([][]point, len(c.accepted))
	for i, md := range c.accepted {
		out[i] = points(md)
	}
	return out
}

// testEmitter drives an emitter by hand on a fake clock: no flush loop.
type testEmitter struct {
	*emitter
	tel   *componenttest.Telemetry
	logs  *observer.ObservedLogs
	clock time.Time
}

func newTestEmitter(t *testing.T, d *deriver, interval time.Duration, next consumer.Metrics) *testEmitter {
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	set := tel.NewTelemetrySettings()
	core, logs := observer.New(zapcore.WarnLevel)
	set.Logger = zap.New(core)
	e, err := newEmitter(set, testTelemetry(set), d, interval, next)
	require.NoError(t, err)
	te := &testEmitter{emitter: e, tel: tel, logs: logs}
	e.now = func() time.Time { return te.clock }
	return te
}

func (te *testEmitter) consumeTraces(td ptrace.Traces, now time.Time) {
	te.clock = now
	te.update(context.Background(), func(d *deriver, now time.Time) { d.consumeTraces(td, now) })
}

func (te *testEmitter) consumeLogs(ld plog.Logs, now time.Time) {
	te.clock = now
	te.update(context.Background(), func(d *deriver, now time.Time) { d.consumeLogs(ld, now) })
}

func (te *testEmitter) flushAt(now time.Time) error {
	te.clock = now
	return te.flush(context.Background())
}

// bucketsWith returns bucket counts for bounds with counts[i] at index i.
func bucketsWith(bounds []float64, counts map[int]uint64) []uint64 {
	out := make([]uint64, len(bounds)+1)
	for i, n := range counts {
		out[i] = n
	}
	return out
}

func logField(t *testing.T, e observer.LoggedEntry, key string) any {
	t.Helper()
	v, ok := e.ContextMap()[key]
	require.Truef(t, ok, "log %q has no field %q", e.Message, key)
	return v
}

func TestRefusedDeltaFlushIsCarriedOver(t *testing.T) {
	next := &scriptedConsumer{script: []error{errQueueFull, errQueueFull}}
	te := newTestEmitter(t, newConnectorDeriver(testConfig(), t0), 10*time.Second, next)
	svc := newTestService(t, newOTLPSink(t))

	// Interval 1, [0 s, 10 s]: refused.
	svc.jobSpan("job-1", at(-40*time.Second), at(-10*time.Second), codes.Unset)       // success, 30 s
	svc.jobSpan("job-2", at(-90*time.Second), at(0), codes.Unset)                     // success, 90 s
	svc.jobSpan("job-3", at(-399*time.Second), at(time.Second), codes.Error)          // failure, 400 s
	svc.request("POST", "/_build", 202, at(time.Second), at(1250*time.Millisecond))   // 0.25 s
	svc.request("POST", "/_build", 202, at(2*time.Second), at(2500*time.Millisecond)) // 0.5 s
	te.consumeTraces(svc.traces(), at(5*time.Second))
	require.ErrorIs(t, te.flushAt(at(10*time.Second)), errQueueFull)

	// Interval 2, [10 s, 20 s]: refused again.
	svc.jobSpan("job-4", at(-20*time.Second), at(10*time.Second), codes.Unset) // success, 30 s
	svc.request("GET", "/_status/{job_id}", 200, at(11*time.Second), at(11010*time.Millisecond))
	te.consumeTraces(svc.traces(), at(15*time.Second))
	require.ErrorIs(t, te.flushAt(at(20*time.Second)), errQueueFull)

	// Interval 3, [20 s, 30 s]: accepted.
	svc.jobSpan("job-5", at(20*time.Second), at(25*time.Second), codes.Error) // failure, 5 s
	te.consumeTraces(svc.traces(), at(26*time.Second))
	require.NoError(t, te.flushAt(at(30*time.Second)))

	accepted := next.acceptedPoints()
	require.Len(t, accepted, 1)
	ps := accepted[0]
	for _, p := range ps {
		assert.Equalf(t, ts(t0), p.start, "%s starts with the first interval that was not sent", p.metric)
		assert.Equal(t, ts(at(30*time.Second)), p.ts)
		assert.Equal(t, pmetric.AggregationTemporalityDelta, p.temporality)
	}
	// Jobs 1, 2, 4 succeeded (30 + 90 + 30 s); 3 and 5 failed (400 + 5 s).
	assert.Equal(t, int64(3), one(t, ps, metricBuildJobs, attrs("build.result", "success")).value)
	assert.Equal(t, int64(2), one(t, ps, metricBuildJobs, attrs("build.result", "failure")).value)
	okDur := one(t, ps, metricBuildJobDuration, attrs("build.result", "success"))
	assert.Equal(t, uint64(3), okDur.count)
	assert.Equal(t, 150.0, okDur.sum)
	assert.Equal(t, 30.0, okDur.min)
	assert.Equal(t, 90.0, okDur.max)
	// Bounds 1, 5, 10, 30, 60, 120, ...: 30 is in (10, 30], 90 in (60, 120].
	assert.Equal(t, bucketsWith(defaultJobDurationBuckets, map[int]uint64{3: 2, 5: 1}), okDur.buckets)
	failDur := one(t, ps, metricBuildJobDuration, attrs("build.result", "failure"))
	assert.Equal(t, uint64(2), failDur.count)
	assert.Equal(t, 405.0, failDur.sum)
	assert.Equal(t, 5.0, failDur.min)
	assert.Equal(t, 400.0, failDur.max)
	// 5 is in (1, 5], 400 in (300, 600].
	assert.Equal(t, bucketsWith(defaultJobDurationBuckets, map[int]uint64{1: 1, 7: 1}), failDur.buckets)

	post := attrs("http.route", "/_build", "http.request.method", "POST", "http.response.status_class", "2xx")
	assert.Equal(t, int64(2), one(t, ps, metricAPIRequests, post).value)
	postDur := one(t, ps, metricAPIRequestDuration, post)
	assert.Equal(t, 0.75, postDur.sum)
	assert.Equal(t, 0.25, postDur.min)
	assert.Equal(t, 0.5, postDur.max)
	// API bounds 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, ...
	assert.Equal(t, bucketsWith(defaultAPIDurationBuckets, map[int]uint64{6: 1, 7: 1}), postDur.buckets)
	assert.Equal(t, int64(1), one(t, ps, metricAPIRequests, attrs("http.route", "/_status/{job_id}", "http.request.method", "GET", "http.response.status_class", "2xx")).value)

	// One warning per refused flush, with the series carried over.
	warnings := te.logs.FilterMessageSnippet("carrying them over").All()
	require.Len(t, warnings, 2)
	assert.Equal(t, zapcore.WarnLevel, warnings[0].Level)
	assert.Equal(t, errQueueFull.Error(), logField(t, warnings[0], "error"))
	assert.EqualValues(t, 3, logField(t, warnings[0], "series"), "jobs success, jobs failure, POST requests")
	assert.EqualValues(t, 4, logField(t, warnings[1], "series"), "and GET requests")
	assert.Equal(t, 2, te.logs.Len(), "nothing else is logged")
	assertCounter(t, te.tel, "otelcol_buildjob_flushes_failed", []metricdata.DataPoint[int64]{
		{Value: 2, Attributes: attribute.NewSet(attribute.String("outcome", "carried_over"))},
	}, metricdatatest.IgnoreTimestamp())

	// Once accepted, the next points start at that flush.
	svc.request("POST", "/_build", 202, at(31*time.Second), at(31250*time.Millisecond))
	te.consumeTraces(svc.traces(), at(32*time.Second))
	require.NoError(t, te.flushAt(at(40*time.Second)))
	accepted = next.acceptedPoints()
	require.Len(t, accepted, 2)
	p := one(t, accepted[1], metricAPIRequests, post)
	assert.Equal(t, int64(1), p.value)
	assert.Equal(t, ts(at(30*time.Second)), p.start)
}

// Batches that arrive while a flush is on its way are merged with it when
// it is refused: counts, sums, minimum, maximum and buckets.
func TestBatchDuringRefusedFlushIsMerged(t *testing.T) {
	next := &scriptedConsumer{script: []error{errQueueFull}}
	te := newTestEmitter(t, newConnectorDeriver(testConfig(), t0), 10*time.Second, next)
	svc := newTestService(t, newOTLPSink(t))
	svc.jobSpan("job-1", at(-30*time.Second), at(0), codes.Unset) // success, 30 s
	te.consumeTraces(svc.traces(), at(5*time.Second))
	next.meanwhile = func() {
		svc.jobSpan("job-2", at(-80*time.Second), at(10*time.Second), codes.Unset) // success, 90 s
		svc.jobSpan("job-3", at(5*time.Second), at(10*time.Second), codes.Error)   // failure, 5 s
		te.update(context.Background(), func(d *deriver, now time.Time) { d.consumeTraces(svc.traces(), now) })
	}
	require.ErrorIs(t, te.flushAt(at(10*time.Second)), errQueueFull)
	require.NoError(t, te.flushAt(at(20*time.Second)))

	accepted := next.acceptedPoints()
	require.Len(t, accepted, 1)
	ps := accepted[0]
	success := one(t, ps, metricBuildJobs, attrs("build.result", "success"))
	assert.Equal(t, int64(2), success.value)
	assert.Equal(t, ts(t0), success.start)
	okDur := one(t, ps, metricBuildJobDuration, attrs("build.result", "success"))
	assert.Equal(t, uint64(2), okDur.count)
	assert.Equal(t, 120.0, okDur.sum)
	assert.Equal(t, 30.0, okDur.min)
	assert.Equal(t, 90.0, okDur.max)
	assert.Equal(t, bucketsWith(defaultJobDurationBuckets, map[int]uint64{3: 1, 5: 1}), okDur.buckets)
	failDur := one(t, ps, metricBuildJobDuration, attrs("build.result", "failure"))
	assert.Equal(t, uint64(1), failDur.count)
	assert.Equal(t, 5.0, failDur.sum)
	assert.Len(t, ps, 4, dump(ps))
}

// A consumererror.Metrics names the points that failed; the whole flush is
// kept (see README), so the accepted point covers both intervals.
func TestRefusedWithFailedSubsetKeepsWholeFlush(t *testing.T) {
	next := &scriptedConsumer{}
	te := newTestEmitter(t, newConnectorDeriver(testConfig(), t0), 10*time.Second, next)
	svc := newTestService(t, newOTLPSink(t))
	svc.jobSpan("job-1", at(-30*time.Second), at(time.Second), codes.Unset)
	svc.jobSpan("job-2", at(-30*time.Second), at(2*time.Second), codes.Error)
	te.consumeTraces(svc.traces(), at(5*time.Second))
	// Only the failure point is said to have failed.
	subset := pmetric.NewMetrics()
	sum := subset.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	sum.SetName(metricBuildJobs)
	dp := sum.SetEmptySum().DataPoints().AppendEmpty()
	dp.Attributes().PutStr("build.result", "failure")
	dp.SetIntValue(1)
	next.script = []error{consumererror.NewMetrics(errQueueFull, subset)}
	require.Error(t, te.flushAt(at(10*time.Second)))

	require.NoError(t, te.flushAt(at(20*time.Second)))
	accepted := next.acceptedPoints()
	require.Len(t, accepted, 1)
	assert.Equal(t, int64(1), one(t, accepted[0], metricBuildJobs, attrs("build.result", "success")).value)
	assert.Equal(t, int64(1), one(t, accepted[0], metricBuildJobs, attrs("build.result", "failure")).value)
}

func TestPermanentlyRefusedFlushIsDropped(t *testing.T) {
	next := &scriptedConsumer{script: []error{consumererror.NewPermanent(errors.New("invalid metric name"))}, emptiesRefused: true}
	te := newTestEmitter(t, newConnectorDeriver(testConfig(), t0), 10*time.Second, next)
	svc := newTestService(t, newOTLPSink(t))

	svc.jobSpan("job-1", at(-30*time.Second), at(time.Second), codes.Unset)
	svc.jobSpan("job-2", at(-60*time.Second), at(2*time.Second), codes.Unset)
	te.consumeTraces(svc.traces(), at(5*time.Second))
	require.Error(t, te.flushAt(at(10*time.Second)))

	svc.jobSpan("job-3", at(-30*time.Second), at(11*time.Second), codes.Error)
	te.consumeTraces(svc.traces(), at(15*time.Second))
	require.NoError(t, te.flushAt(at(20*time.Second)))

	accepted := next.acceptedPoints()
	require.Len(t, accepted, 1)
	ps := accepted[0]
	assert.Empty(t, matching(ps, metricBuildJobs, attrs("build.result", "success")), "the dropped flush is not sent again")
	p := one(t, ps, metricBuildJobs, attrs("build.result", "failure"))
	assert.Equal(t, int64(1), p.value)
	assert.Equal(t, ts(at(10*time.Second)), p.start, "the dropped interval is not claimed")

	errs := te.logs.FilterMessageSnippet("permanent error").All()
	require.Len(t, errs, 1)
	assert.Equal(t, zapcore.ErrorLevel, errs[0].Level)
	assertCounter(t, te.tel, "otelcol_buildjob_flushes_failed", []metricdata.DataPoint[int64]{
		{Value: 1, Attributes: attribute.NewSet(attribute.String("outcome", "dropped"))},
	}, metricdatatest.IgnoreTimestamp())
	// build.jobs{success} and build.job.duration{success}.
	assertCounter(t, te.tel, "otelcol_buildjob_points_dropped", []metricdata.DataPoint[int64]{{Value: 2}}, metricdatatest.IgnoreTimestamp())
}

// In cumulative mode a refused flush loses nothing: the series keep their
// totals, and the next flush reports them.
func TestRefusedCumulativeFlushLosesNothing(t *testing.T) {
	cfg := testConfig()
	cfg.Temporality = TemporalityCumulative
	next := &scriptedConsumer{script: []error{nil, errQueueFull, errQueueFull}}
	te := newTestEmitter(t, newConnectorDeriver(cfg, t0), 10*time.Second, next)
	svc := newTestService(t, newOTLPSink(t))

	svc.jobSpan("job-1", at(-29*time.Second), at(time.Second), codes.Unset) // success, 30 s
	te.consumeTraces(svc.traces(), at(5*time.Second))
	require.NoError(t, te.flushAt(at(10*time.Second)))
	svc.jobSpan("job-2", at(-79*time.Second), at(11*time.Second), codes.Unset) // success, 90 s
	te.consumeTraces(svc.traces(), at(15*time.Second))
	require.Error(t, te.flushAt(at(20*time.Second)))
	svc.jobSpan("job-3", at(-379*time.Second), at(21*time.Second), codes.Error) // failure, 400 s
	te.consumeTraces(svc.traces(), at(25*time.Second))
	require.Error(t, te.flushAt(at(30*time.Second)))
	require.NoError(t, te.flushAt(at(40*time.Second)))

	accepted := next.acceptedPoints()
	require.Len(t, accepted, 2)
	first := one(t, accepted[0], metricBuildJobs, attrs("build.result", "success"))
	assert.Equal(t, int64(1), first.value)
	ps := accepted[1]
	success := one(t, ps, metricBuildJobs, attrs("build.result", "success"))
	assert.Equal(t, int64(2), success.value, "a total, not an increment")
	assert.Equal(t, pmetric.AggregationTemporalityCumulative, success.temporality)
	assert.Equal(t, ts(t0), success.start)
	assert.Equal(t, ts(at(40*time.Second)), success.ts)
	okDur := one(t, ps, metricBuildJobDuration, attrs("build.result", "success"))
	assert.Equal(t, uint64(2), okDur.count)
	assert.Equal(t, 120.0, okDur.sum)
	assert.Equal(t, bucketsWith(defaultJobDurationBuckets, map[int]uint64{3: 1, 5: 1}), okDur.buckets)
	assert.Equal(t, int64(1), one(t, ps, metricBuildJobs, attrs("build.result", "failure")).value)
	assert.Equal(t, 400.0, one(t, ps, metricBuildJobDuration, attrs("build.result", "failure")).sum)
}

// build.jobs.active reports 0 once when a group empties; if that flush is
// refused, the next one reports the 0 again.
func TestRefusedZeroActiveIsReportedAgain(t *testing.T) {
	next := &scriptedConsumer{script: []error{nil, errQueueFull}}
	te := newTestEmitter(t, newConnectorDeriver(testConfig(), t0), 10*time.Second, next)
	svc := newTestService(t, newOTLPSink(t))

	svc.status("job-1", running, at(time.Second))
	te.clock = at(2 * time.Second)
	te.update(context.Background(), func(d *deriver, now time.Time) { d.consumeLogs(svc.logs(), now) })
	require.NoError(t, te.flushAt(at(10*time.Second)))
	svc.status("job-1", completed, at(12*time.Second))
	te.clock = at(13 * time.Second)
	te.update(context.Background(), func(d *deriver, now time.Time) { d.consumeLogs(svc.logs(), now) })
	require.Error(t, te.flushAt(at(20*time.Second)))
	require.NoError(t, te.flushAt(at(30*time.Second)))

	accepted := next.acceptedPoints()
	require.Len(t, accepted, 2)
	assert.Equal(t, int64(1), one(t, accepted[0], metricBuildJobsActive, attrs()).value)
	assert.Equal(t, int64(0), one(t, accepted[1], metricBuildJobsActive, attrs()).value)
	jobs := one(t, accepted[1], metricBuildJobs, attrs("build.result", "success"))
	assert.Equal(t, int64(1), jobs.value)
	assert.Equal(t, ts(at(10*time.Second)), jobs.start)
	require.NoError(t, te.flushAt(at(40*time.Second)))
	assert.Len(t, next.acceptedPoints(), 2, "the 0 is reported once")
}

// The counters that move with the input are observed from the emitter's
// totals at each collection: they add up across batches and flushes, a
// count not tallied yet (a failed write after a flush) is already there,
// and a count that never moved has no series.
func TestTelemetryObservesTheTotals(t *testing.T) {
	te := newTestEmitter(t, newConnectorDeriver(testConfig(), t0), 10*time.Second, &scriptedConsumer{})
	svc := newTestService(t, newOTLPSink(t))
	dedup := func(want int64) {
		t.Helper()
		assertCounter(t, te.tel, "otelcol_buildjob_records_deduplicated", []metricdata.DataPoint[int64]{{Value: want}}, metricdatatest.IgnoreTimestamp())
	}

	svc.status("job-1", running, at(-30*time.Second))
	svc.status("job-1", completed, at(time.Second))
	svc.jobSpan("job-1", at(-30*time.Second), at(time.Second), codes.Unset)
	te.consumeLogs(svc.logs(), at(2*time.Second))
	te.consumeTraces(svc.traces(), at(3*time.Second))
	dedup(1)
	_, err := te.tel.GetMetric("otelcol_buildjob_runs_evicted")
	require.Error(t, err, "nothing was evicted: no series")

	svc.jobSpan("job-1", at(-30*time.Second), at(time.Second), codes.Unset) // redelivered
	te.consumeTraces(svc.traces(), at(4*time.Second))
	require.NoError(t, te.flushAt(at(10*time.Second)))
	dedup(2)

	te.mu.Lock()
	te.d.stats.stateWriteFailures++ // as handedOver counts a failed delete
	te.mu.Unlock()
	assertCounter(t, te.tel, "otelcol_buildjob_state_write_failures", []metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())
	dedup(2)
}
