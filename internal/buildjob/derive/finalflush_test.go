// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derive

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap/zapcore"
)

// The processor's api.requests, from the service's cumulative histograms,
// are carried over the same way.
func TestProcessorCarriesOverRefusedFlush(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	next := &scriptedConsumer{}
	te := newTestEmitter(t, newProcessorDeriver(defaultOutput(), DefaultCumulativeConfig(), start, nil), 10*time.Second, next)
	p := &testProcessor{Derivation: &Derivation{emitter: te.emitter, http: true}}
	sink := newOTLPSink(t)
	svc := newSDKMeter(t, sink, false)
	h := svc.serverDuration()
	post := attrs("http.route", "/_build", "http.request.method", "POST", "http.response.status_class", "2xx")

	pass := func() {
		for _, md := range sink.takeMetrics() {
			out, err := p.ProcessMetrics(ctx, md)
			require.NoError(t, err)
			assert.Equal(t, md, out, "input passes through")
		}
	}
	te.clock = start.Add(5 * time.Second)
	request(h, "POST", "/_build", 202, 0.2)
	request(h, "POST", "/_build", 202, 0.2)
	request(h, "GET", "/_status/{job_id}", 404, 0.01)
	svc.export()
	pass()
	next.script = []error{errQueueFull, consumererror.NewMetrics(errors.New("memory limit exceeded"), pmetric.NewMetrics())}
	te.clock = start.Add(10 * time.Second)
	require.Error(t, te.flush(ctx))

	// The SDK's next export repeats the totals: 3 POST, 1 GET.
	te.clock = start.Add(15 * time.Second)
	request(h, "POST", "/_build", 202, 0.2)
	svc.export()
	pass()
	te.clock = start.Add(20 * time.Second)
	require.Error(t, te.flush(ctx))

	te.clock = start.Add(25 * time.Second)
	request(h, "POST", "/_build", 500, 0.2)
	svc.export()
	pass()
	te.clock = start.Add(30 * time.Second)
	require.NoError(t, te.flush(ctx))

	accepted := next.acceptedPoints()
	require.Len(t, accepted, 1)
	ps := accepted[0]
	got := one(t, ps, metricAPIRequests, post)
	assert.Equal(t, int64(3), got.value)
	assert.Equal(t, ts(start), got.start)
	assert.Equal(t, ts(start.Add(30*time.Second)), got.ts)
	assert.Equal(t, int64(1), one(t, ps, metricAPIRequests, attrs("http.route", "/_status/{job_id}", "http.request.method", "GET", "http.response.status_class", "4xx")).value)
	assert.Equal(t, int64(1), one(t, ps, metricAPIRequests, attrs("http.route", "/_build", "http.request.method", "POST", "http.response.status_class", "5xx")).value)
	assert.Equal(t, int64(5), total(ps, metricAPIRequests, nil))
	assertCounter(t, te.tel, "otelcol_buildjob_flushes_failed", []metricdata.DataPoint[int64]{
		{Value: 2, Attributes: attribute.NewSet(attribute.String("outcome", "carried_over"))},
	}, metricdatatest.IgnoreTimestamp())
}

// refuseAlways refuses every call with a retryable error.
type refuseAlways struct{ calls atomic.Int64 }

func (*refuseAlways) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (c *refuseAlways) ConsumeMetrics(context.Context, pmetric.Metrics) error {
	c.calls.Add(1)
	return errQueueFull
}

// blockUntilDone blocks every call until its context ends, like a sending
// queue with block_on_overflow that never frees up.
type blockUntilDone struct{}

func (blockUntilDone) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (blockUntilDone) ConsumeMetrics(ctx context.Context, _ pmetric.Metrics) error {
	<-ctx.Done()
	return ctx.Err()
}

func TestFinalFlushRefusedIsLostAndCounted(t *testing.T) {
	for name, tc := range map[string]struct {
		next    consumer.Metrics
		wantErr error
	}{
		"retryable refusal until the bound": {&refuseAlways{}, errQueueFull},
		"blocked until the bound":           {blockUntilDone{}, context.DeadlineExceeded},
	} {
		t.Run(name, func(t *testing.T) {
			te := newTestEmitter(t, newConnectorDeriver(testConfig(), t0), 300*time.Millisecond, tc.next)
			svc := newTestService(t, newOTLPSink(t))
			svc.jobSpan("job-1", at(-30*time.Second), at(time.Second), codes.Unset)
			te.consumeTraces(svc.traces(), at(5*time.Second))
			te.clock = at(10 * time.Second)

			// context.Background has no deadline: the shutdown bounds itself.
			err := te.shutdown(context.Background())
			require.ErrorIs(t, err, tc.wantErr)

			lost := te.logs.FilterMessageSnippet("lost").All()
			require.Len(t, lost, 1)
			assert.Equal(t, zapcore.ErrorLevel, lost[0].Level)
			assert.EqualValues(t, 1, logField(t, lost[0], "series"))
			assert.EqualValues(t, 2, logField(t, lost[0], "data_points"))
			m, err := te.tel.GetMetric("otelcol_buildjob_flushes_failed")
			require.NoError(t, err)
			byOutcome := map[string]int64{}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				o, _ := dp.Attributes.Value("outcome")
				byOutcome[o.AsString()] = dp.Value
			}
			assert.Equal(t, int64(1), byOutcome["dropped"])
			assertCounter(t, te.tel, "otelcol_buildjob_points_dropped", []metricdata.DataPoint[int64]{{Value: 2}}, metricdatatest.IgnoreTimestamp())
			if r, ok := tc.next.(*refuseAlways); ok {
				assert.Greater(t, r.calls.Load(), int64(1), "a retryable refusal is retried")
				assert.Equal(t, r.calls.Load()-1, byOutcome["carried_over"])
			}
		})
	}
}

// blockFirst blocks its first call until the context ends, then accepts.
type blockFirst struct {
	scriptedConsumer
	blocked chan struct{}
	once    sync.Once
}

func (c *blockFirst) ConsumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	first := false
	c.once.Do(func() { first = true })
	if first {
		close(c.blocked)
		<-ctx.Done()
		return ctx.Err()
	}
	return c.scriptedConsumer.ConsumeMetrics(ctx, md)
}

// A periodic flush blocked on the next consumer is cancelled by shutdown
// and carried over into the final flush.
func TestBlockedFlushIsCarriedIntoFinalFlush(t *testing.T) {
	ctx := context.Background()
	next := &blockFirst{blocked: make(chan struct{})}
	cfg := testConfig()
	cfg.MetricsFlushInterval = 10 * time.Millisecond
	p := newConnectorPair(t, testConnectorFactory(), component.NewID(testType), cfg, next)
	p.start(t)
	svc := newTestService(t, newOTLPSink(t))
	now := time.Now()
	svc.jobSpan("job-1", now.Add(-time.Minute), now, codes.Unset)
	require.NoError(t, p.traces.ConsumeTraces(ctx, svc.traces()))
	<-next.blocked
	svc.jobSpan("job-2", now.Add(-time.Minute), now, codes.Error)
	require.NoError(t, p.traces.ConsumeTraces(ctx, svc.traces()))

	require.NoError(t, p.traces.Shutdown(ctx))
	require.NoError(t, p.logs.Shutdown(ctx))
	accepted := next.acceptedPoints()
	require.Len(t, accepted, 1)
	assert.Equal(t, int64(1), one(t, accepted[0], metricBuildJobs, attrs("build.result", "success")).value)
	assert.Equal(t, int64(1), one(t, accepted[0], metricBuildJobs, attrs("build.result", "failure")).value)
}

// refuseWhile refuses every other call with a retryable error while
// refusing is set.
type refuseWhile struct {
	refusing atomic.Bool
	attempts atomic.Int64
	refused  atomic.Int64
	scriptedConsumer
}

func (c *refuseWhile) ConsumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	if c.refusing.Load() && c.attempts.Add(1)%2 == 1 {
		c.refused.Add(1)
		return errQueueFull
	}
	return c.scriptedConsumer.ConsumeMetrics(ctx, md)
}

// Batches arrive from several goroutines while the flush loop emits every
// millisecond to a consumer that refuses every other flush: every job and
// request is reported exactly once in the end.
func TestCarryOverUnderConcurrentBatches(t *testing.T) {
	const (
		workers           = 4
		batchesPerWorker  = 40
		jobsPerBatch      = 2
		requestsPerBatch  = 3
		wantJobs          = workers * batchesPerWorker * jobsPerBatch
		wantRequests      = workers * batchesPerWorker * requestsPerBatch
		wantFailuresEvery = 2 // job j of a batch fails when j is odd
	)
	ctx := context.Background()
	next := &refuseWhile{}
	next.refusing.Store(true)
	cfg := testConfig()
	cfg.MetricsFlushInterval = time.Millisecond
	p := newConnectorPair(t, testConnectorFactory(), component.NewID(testType), cfg, next)

	// The batches are recorded by the SDK first, then replayed concurrently.
	svc := newTestService(t, newOTLPSink(t))
	now := time.Now()
	batches := make([][]ptrace.Traces, workers)
	for w := range workers {
		for b := range batchesPerWorker {
			for j := range jobsPerBatch {
				status := codes.Unset
				if j%wantFailuresEvery == 1 {
					status = codes.Error
				}
				svc.jobSpan(fmt.Sprintf("job-%d-%d-%d", w, b, j), now.Add(-time.Minute), now, status)
			}
			for range requestsPerBatch {
				svc.request("GET", "/_status/{job_id}", 200, now.Add(-time.Millisecond), now)
			}
			batches[w] = append(batches[w], svc.traces())
		}
	}

	p.start(t)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, td := range batches[w] {
				assert.NoError(t, p.traces.ConsumeTraces(ctx, td))
				time.Sleep(100 * time.Microsecond)
			}
		}()
	}
	wg.Wait()
	next.refusing.Store(false)
	require.NoError(t, p.traces.Shutdown(ctx))
	require.NoError(t, p.logs.Shutdown(ctx))

	var jobs, failures, requests int64
	for _, ps := range next.acceptedPoints() {
		jobs += total(ps, metricBuildJobs, nil)
		failures += total(ps, metricBuildJobs, attrs("build.result", "failure"))
		requests += total(ps, metricAPIRequests, nil)
	}
	assert.Equal(t, int64(wantJobs), jobs)
	assert.Equal(t, int64(wantJobs/wantFailuresEvery), failures)
	assert.Equal(t, int64(wantRequests), requests)
	assert.Positive(t, next.refused.Load(), "flushes were refused meanwhile")
}
