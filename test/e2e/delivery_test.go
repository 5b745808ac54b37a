// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/buildsim"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
)

// Scenarios 1-6 of the delivery suite: buildsim -> the built collector -> the
// CloudWatch test endpoint, with faults on the CloudWatch side, the
// collector killed or stopped, and the service restarting. Each compares
// what landed with buildsim's ground truth exactly.

// Scenario 1: every derived count and duration sum lands exactly once,
// histogram statistics are exact, and the service's SDK metrics pass
// through with the right units. Two services at once, one over OTLP/gRPC and
// one over OTLP/HTTP, must not mix.
func TestSteadyRun(t *testing.T) {
	e := newEnv(t, nil)
	p := e.cfg.ports
	// The gRPC service sends each run's RUNNING record 2.5 s before the rest
	// of the run, as a real service would: runs are active across flushes.
	grpcSim := simConfig(p, buildsim.ProtocolGRPC, "build-grpc", 11)
	grpcSim.StartLead = 2500 * time.Millisecond
	sums := runSims(t, grpcSim, simConfig(p, buildsim.ProtocolHTTP, "build-http", 12))
	// Periodic flushes deliver everything while the collector runs.
	for _, s := range sums {
		e.waitJobs(30*time.Second, serviceDims(s), totalJobs(s.Generated))
	}
	// Settle one more flush, then a clean stop adds nothing more.
	time.Sleep(2 * e.cfg.FlushInterval)
	e.col.stop(30 * time.Second)

	datums := e.cw.Datums()
	requireNamespace(t, datums, e.cfg.Namespace)
	for _, s := range sums {
		t.Run(s.Service, func(t *testing.T) {
			checkDerived(t, datums, s.Generated, serviceDims(s), e.cfg.APIFromSpans)
			checkSDKMetrics(t, datums, s.SDKMetrics, serviceDims(s))
		})
	}
	active := aggregate(datums, mJobsActive, serviceDims(sums[0]))
	assert.Positive(t, active.Max, "%s: runs were active across flushes but never reported", mJobsActive)
	assert.Equal(t, map[string]int{"Count": active.Datums}, active.Units)
	st := e.cw.Stats()
	assert.Zero(t, st.Rejected, "requests CloudWatch would reject")
	assert.Equal(t, st.Requests, st.Accepted)
	t.Logf("landed:\n%s", describeDatums(datums))
}

// Scenario 2: CloudWatch unreachable for a while (connection refused), then
// answering 503, then healthy: nothing is lost, and the persistent queue
// stays within its configured capacity.
func TestCloudWatchOutage(t *testing.T) {
	const queueSize = 200
	e := newEnv(t, func(c *sidecarConfig) { c.QueueSize = queueSize })
	require.NoError(t, e.cw.SetDown(true))

	s := runSim(t, simConfig(e.cfg.ports, buildsim.ProtocolGRPC, "build-outage", 21))

	// During the outage the batches wait in the queue, never more than its capacity.
	var maxQueued float64
	require.True(t, binarytest.Eventually(15*time.Second, func() bool {
		q, _ := e.scrape().Sum("otelcol_exporter_queue_size", map[string]string{"exporter": "cloudwatch"})
		maxQueued = max(maxQueued, q)
		return q > 0
	}), "nothing queued during the outage")
	samples := e.scrape()
	assert.Equal(t, float64(queueSize), requireMetric(t, samples, "otelcol_exporter_queue_capacity", map[string]string{"exporter": "cloudwatch"}))
	for range 10 {
		q := requireMetric(t, e.scrape(), "otelcol_exporter_queue_size", map[string]string{"exporter": "cloudwatch"})
		maxQueued = max(maxQueued, q)
		time.Sleep(200 * time.Millisecond)
	}
	assert.LessOrEqual(t, maxQueued, float64(queueSize))
	assert.Empty(t, e.cw.Datums(), "datums landed while CloudWatch was down")

	// Back, but failing with 503 for a while.
	e.cw.SetFaults(cloudwatchtest.Faults{ServerErrorEvery: 1})
	require.NoError(t, e.cw.SetDown(false))
	require.True(t, binarytest.Eventually(15*time.Second, func() bool { return e.cw.Stats().ServerErrors >= 3 }), "the exporter did not retry against 503s")
	assert.Empty(t, e.cw.Datums())

	e.cw.SetFaults(cloudwatchtest.Faults{})
	e.waitJobs(60*time.Second, serviceDims(s), totalJobs(s.Generated))
	time.Sleep(2 * e.cfg.FlushInterval)
	e.col.stop(30 * time.Second)

	datums := e.cw.Datums()
	checkDerived(t, datums, s.Generated, serviceDims(s), e.cfg.APIFromSpans)
	checkSDKMetrics(t, datums, s.SDKMetrics, serviceDims(s))
	t.Logf("max queued batches %v of %d; CloudWatch stats %+v", maxQueued, queueSize, e.cw.Stats())
}

// Scenario 3: a throttling storm (every other call answered Throttling):
// nothing lost, nothing duplicated, and the exporter's own telemetry shows
// the throttled calls and the retried points. Here the service sends API
// spans but no HTTP metrics, so api.requests comes from the spans.
func TestThrottlingStorm(t *testing.T) {
	e := newEnv(t, func(c *sidecarConfig) { c.APIFromSpans = true })
	e.cw.SetFaults(cloudwatchtest.Faults{ThrottleEvery: 2})

	cfg := simConfig(e.cfg.ports, buildsim.ProtocolGRPC, "build-throttled", 31)
	cfg.APIMetrics = false
	s := runSim(t, cfg)
	e.waitJobs(60*time.Second, serviceDims(s), totalJobs(s.Generated))
	time.Sleep(2 * e.cfg.FlushInterval)

	samples := e.scrape()
	st := e.cw.Stats()
	require.Positive(t, st.Throttled)
	throttled := requireMetric(t, samples, "otelcol_exporter_cloudwatch_requests", map[string]string{"outcome": "throttled"})
	assert.Equal(t, float64(st.Throttled), throttled, "throttled calls seen by the exporter vs answered by CloudWatch")
	assert.Positive(t, requireMetric(t, samples, "otelcol_exporter_cloudwatch_points_retried", nil), "points handed back to the retry")
	e.col.stop(30 * time.Second)

	datums := e.cw.Datums()
	checkDerived(t, datums, s.Generated, serviceDims(s), e.cfg.APIFromSpans)
	checkSDKMetrics(t, datums, s.SDKMetrics, serviceDims(s))
	t.Logf("CloudWatch stats %+v", e.cw.Stats())
}

// Scenario 4: kill -9 with the file_storage queue, then restart: what the
// collector acknowledged over OTLP and had put in its queue is delivered by
// the next run.
//
// Derived metrics are aggregated in memory until the next flush
// (metrics_flush_interval) before they enter the queue, so spans and log
// records acknowledged less than one flush interval before a kill -9 are
// not in the queue yet. The test therefore kills after a flush interval; the
// service's own metrics go straight into the queue and are checked without
// that wait.
func TestKill9WithPersistentQueue(t *testing.T) {
	e := newEnv(t, nil)
	require.NoError(t, e.cw.SetDown(true))

	s := runSim(t, simConfig(e.cfg.ports, buildsim.ProtocolGRPC, "build-kill9", 41))
	// Let the connector flush into the queue (two intervals); the derived
	// counts not flushed by then are in its state, which the kill keeps.
	time.Sleep(2*e.cfg.FlushInterval + 500*time.Millisecond)
	var q float64
	require.True(t, binarytest.Eventually(30*time.Second, func() bool {
		q = requireMetric(t, e.scrape(), "otelcol_exporter_queue_size", map[string]string{"exporter": "cloudwatch"})
		return q > 0
	}), "nothing in the persistent queue before the kill")
	e.col.Kill9()
	assert.Empty(t, e.cw.Datums())

	require.NoError(t, e.cw.SetDown(false))
	e.col = e.start()
	e.waitJobs(60*time.Second, serviceDims(s), totalJobs(s.Generated))
	time.Sleep(2 * e.cfg.FlushInterval)
	e.col.stop(30 * time.Second)

	datums := e.cw.Datums()
	checkDerived(t, datums, s.Generated, serviceDims(s), e.cfg.APIFromSpans)
	checkSDKMetrics(t, datums, s.SDKMetrics, serviceDims(s))
	t.Logf("%v batches were queued at the kill", q)
}

// Scenario 4b: the service's own metrics acknowledged just before a kill -9
// (no wait at all) are delivered after the restart: the metrics pipeline
// puts them in the persistent queue before answering.
func TestKill9RightAfterAcknowledgement(t *testing.T) {
	e := newEnv(t, nil)
	require.NoError(t, e.cw.SetDown(true))
	cfg := simConfig(e.cfg.ports, buildsim.ProtocolGRPC, "build-kill9-now", 42)
	cfg.JobSpans, cfg.StageSpans, cfg.JobLogs, cfg.APISpans = false, false, false, false
	s := runSim(t, cfg)
	e.col.Kill9()

	require.NoError(t, e.cw.SetDown(false))
	e.col = e.start()
	name := s.SDKMetrics.Counter.Name
	ok := binarytest.Eventually(60*time.Second, func() bool {
		return aggregate(e.cw.Datums(), name, serviceDims(s)).Sum >= float64(s.SDKMetrics.Counter.Total)
	})
	require.True(t, ok, "%s: %v landed, want %v", name, aggregate(e.cw.Datums(), name, serviceDims(s)).Sum, s.SDKMetrics.Counter.Total)
	time.Sleep(2 * e.cfg.FlushInterval)
	e.col.stop(30 * time.Second)
	checkSDKMetrics(t, e.cw.Datums(), s.SDKMetrics, serviceDims(s))
}

// Scenario 5: SIGTERM with data queued and CloudWatch reachable (but slow
// and rate-limited): the collector delivers everything before it exits,
// within the timeout.
func TestSigtermFlushesQueue(t *testing.T) {
	const shutdownTimeout = 30 * time.Second
	e := newEnv(t, func(c *sidecarConfig) { c.MaxRequestsPerSecond = 4 })
	e.cw.SetFaults(cloudwatchtest.Faults{Latency: 100 * time.Millisecond})

	cfg := simConfig(e.cfg.ports, buildsim.ProtocolGRPC, "build-sigterm", 51)
	cfg.MetricSeries = 1000 // about 3000 datums per SDK export: several requests each
	s := runSim(t, cfg)

	q := requireMetric(t, e.scrape(), "otelcol_exporter_queue_size", map[string]string{"exporter": "cloudwatch"})
	require.Positive(t, q, "the queue was already empty; the test needs data queued at SIGTERM")
	took := e.col.stop(shutdownTimeout)
	t.Logf("%v batches queued at SIGTERM; exit after %v", q, took)

	datums := e.cw.Datums()
	checkDerived(t, datums, s.Generated, serviceDims(s), e.cfg.APIFromSpans)
	checkSDKMetrics(t, datums, s.SDKMetrics, serviceDims(s))
	if t.Failed() {
		// Tell "left in the persistent queue for the next run" from "lost".
		t.Run("diagnosis: after a restart on the same queue directory", func(t *testing.T) {
			e.cw.SetFaults(cloudwatchtest.Faults{})
			e.col = e.start()
			binarytest.Eventually(20*time.Second, func() bool { return jobsLanded(e.cw, serviceDims(s)) >= totalJobs(s.Generated) })
			time.Sleep(3 * e.cfg.FlushInterval)
			e.col.stop(shutdownTimeout)
			datums := e.cw.Datums()
			checkDerived(t, datums, s.Generated, serviceDims(s), e.cfg.APIFromSpans)
			checkSDKMetrics(t, datums, s.SDKMetrics, serviceDims(s))
		})
	}
}

// Scenario 6: the build service restarts mid-run: its SDK starts over with a
// new start time and counters from zero. No negative and no double counts.
func TestServiceRestartMidRun(t *testing.T) {
	e := newEnv(t, nil)
	cfg := simConfig(e.cfg.ports, buildsim.ProtocolHTTP, "build-restart", 61)
	cfg.Jobs = 300
	cfg.Rate = 150
	cfg.RestartAfter = 150
	cfg.MetricInterval = 300 * time.Millisecond
	s := runSim(t, cfg)
	require.Equal(t, 1, s.Restarts)

	e.waitJobs(30*time.Second, serviceDims(s), totalJobs(s.Generated))
	time.Sleep(2 * e.cfg.FlushInterval)
	e.col.stop(30 * time.Second)

	datums := e.cw.Datums()
	checkDerived(t, datums, s.Generated, serviceDims(s), e.cfg.APIFromSpans)
	checkSDKMetrics(t, datums, s.SDKMetrics, serviceDims(s))
}

// Scenario 2b: an outage long enough to fill the queue. The queue stays at
// its configured size, and after recovery nothing is lost, whether a full
// queue blocks the pipeline (block_on_overflow: the senders wait) or refuses
// (the default: the OTLP receiver answers UNAVAILABLE and the SDK retries;
// the buildjob connector must keep what it could not hand over).
func TestCloudWatchOutageQueueFull(t *testing.T) {
	for _, block := range []bool{true, false} {
		t.Run(fmt.Sprintf("block_on_overflow=%v", block), func(t *testing.T) {
			outageQueueFull(t, block)
		})
	}
}

func outageQueueFull(t *testing.T, block bool) {
	const queueSize = 4
	e := newEnv(t, func(c *sidecarConfig) { c.QueueSize, c.BlockOnOverflow = queueSize, block })
	require.NoError(t, e.cw.SetDown(true))

	cfg := simConfig(e.cfg.ports, buildsim.ProtocolGRPC, "build-queue-full", 22)
	cfg.Rate = 50 // 4 s of jobs: more flushes and SDK exports than the queue holds
	type result struct {
		s   *buildsim.Summary
		err error
	}
	done := make(chan result, 1)
	go func() {
		s, err := buildsim.Run(context.Background(), cfg)
		done <- result{s, err}
	}()
	// The queue fills (as fast as the machine lets the service send), and
	// never past its size.
	var maxQueued float64
	queued := func() bool {
		if q, ok := e.scrape().Sum("otelcol_exporter_queue_size", map[string]string{"exporter": "cloudwatch"}); ok {
			maxQueued = max(maxQueued, q)
		}
		return maxQueued >= queueSize
	}
	assert.True(t, binarytest.Eventually(60*time.Second, queued), "the queue never filled: at most %v of %d", maxQueued, queueSize)
	for range 10 {
		queued()
		time.Sleep(100 * time.Millisecond)
	}
	assert.Equal(t, float64(queueSize), maxQueued, "the queue filled up to its size and no further")
	samples := e.scrape()
	failed, _ := samples.Sum("otelcol_exporter_enqueue_failed_metric_points", nil)
	refused, _ := samples.Sum("otelcol_receiver_refused_metric_points", nil)
	t.Logf("queue full: enqueue_failed_metric_points=%v receiver_refused_metric_points=%v", failed, refused)

	require.NoError(t, e.cw.SetDown(false))
	r := <-done
	require.NoError(t, r.err)
	s := r.s
	requireAllAcknowledged(t, s)
	e.waitJobs(20*time.Second, serviceDims(s), totalJobs(s.Generated))
	time.Sleep(2 * e.cfg.FlushInterval)
	e.col.stop(30 * time.Second)
	datums := e.cw.Datums()
	checkDerived(t, datums, s.Generated, serviceDims(s), e.cfg.APIFromSpans)
	checkSDKMetrics(t, datums, s.SDKMetrics, serviceDims(s))
}
