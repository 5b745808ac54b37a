// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"sync"
	"testing"
	"time"
)

// The collector is stopped (SIGTERM) and restarted right after a wave of
// jobs ended, while their spans still wait in the SDK's 5 s batch; the
// service keeps running at the SDK's defaults, over OTLP/HTTP (see
// acrossRestarts).
func TestLifecycleSIGTERMWithJobsInBatch(t *testing.T) {
	const name = "lifecycle-sigterm"
	e := newEnv(t)
	col := e.startCollector(binary(t))
	svc := e.startService(name, serviceOptions{HTTPProtobuf: true})
	tr := newTally()
	svc.wave(tr, 20)
	col.stop()
	e.startCollector(binary(t))
	svc.wave(tr, 20)
	svc.checkServiceTruth(tr)
	svc.stop()
	e.awaitExact(name, tr, scenarioDeadline)
}

// The collector is stopped and restarted while a client keeps submitting
// and polling jobs: runs start before the restart and end after it, and
// requests and metric exports are in flight across it (spans and records
// wait in the SDK's batch; see ScheduledBatches).
func TestLifecycleRestartWhileRequestsInFlight(t *testing.T) {
	restartWhileRequestsInFlight(t, "lifecycle-inflight", serviceOptions{MetricInterval: shortMetrics.MetricInterval, ScheduledBatches: true})
}

// The same over OTLP/HTTP at the SDK's batch defaults: the JavaScript
// SDK's HTTP exporter retries a refused connection (its gRPC exporter does
// not retry at all), so batches sent during the restart arrive after it.
func TestLifecycleRestartWhileRequestsInFlightOverHTTP(t *testing.T) {
	restartWhileRequestsInFlight(t, "lifecycle-inflight-http", serviceOptions{MetricInterval: shortMetrics.MetricInterval, HTTPProtobuf: true})
}

func restartWhileRequestsInFlight(t *testing.T, name string, o serviceOptions) {
	e := newEnv(t)
	col := e.startCollector(binary(t))
	svc := e.startService(name, o)
	tr := newTally()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		svc.wave(tr, 60)
	}()
	// Restart once the wave is under way (some runs ended, more to come).
	await(t, 60*time.Second, "first runs ended", func() (bool, string) {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return tr.Jobs["success"] >= 5, ""
	})
	col.stop()
	e.startCollector(binary(t))
	wg.Wait()
	// The jobs end within a second, so an export the SDK tried during the
	// restart can leave its gRPC channel in reconnect backoff when the wave
	// is over, and the SDK drops what it cannot send then (its loss, not
	// the collector's). A running service reconnects: wait until its
	// periodic metric export came through the new collector.
	e.awaitSDKDelivered(name, tr)
	svc.checkServiceTruth(tr)
	svc.stop()
	e.awaitExact(name, tr, scenarioDeadline)
}

// kill -9 of the collector after a wave, restarted on the same state
// directory. build.jobs and api.requests land exactly; the service's
// pass-through histogram counts land exactly or, when the kill fell
// between CloudWatch's answer and the exporter's record of it, with that
// request's datums once more (docs/guarantees.md).
func TestLifecycleKill9(t *testing.T) {
	const name = "lifecycle-kill9"
	e := newEnv(t)
	col := e.startCollector(binary(t))
	svc := e.startService(name, acrossRestarts)
	tr := newTally()
	svc.wave(tr, 20)
	// Let the derived counts of the wave reach the collector (they are
	// then in its memory or queue, which is what the kill tests).
	await(t, 30*time.Second, "the wave's runs derived", func() (bool, string) {
		return e.landed(name).Jobs["success"] >= 1, ""
	})
	// And the service's cumulative histograms: after the kill the new
	// process must go on from the totals already sent, not send them again.
	e.awaitSDKDelivered(name, tr)
	// The kill lands right after CloudWatch answered the histograms: the
	// window in which their request may be sent again (tally.resendableSoFar).
	tr.resendableSoFar()
	col.kill9()
	e.startCollector(binary(t))
	svc.wave(tr, 20)
	svc.checkServiceTruth(tr)
	svc.stop()
	e.awaitExact(name, tr, scenarioDeadline)
}

// The service serves requests before the collector is up (what a start
// order without a health condition gives). The runs and API spans of that
// time are the SDK's to lose, so the first requests start no job; what the
// collector can still count exactly is in the cumulative histograms.
func TestLifecycleLateStart(t *testing.T) {
	const name = "lifecycle-latestart"
	e := newEnv(t)
	svc := e.startService(name, shortMetrics)
	tr := newTally()
	for range 10 {
		svc.badBuild(tr)
		svc.status(tr, "no-such-job")
	}
	e.startCollector(binary(t))
	svc.wave(tr, 20)
	svc.checkServiceTruth(tr)
	svc.stop()
	e.awaitExact(name, tr, scenarioDeadline)
}
