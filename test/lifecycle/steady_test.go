// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"testing"
	"time"
)

// With the collector up before the service and running throughout, at
// the SDK's defaults (gRPC, spans every 5 s, metrics every 60 s,
// cumulative): the reference the fault scenarios are held to.
func TestLifecycleSteady(t *testing.T) {
	e := newEnv(t)
	e.startCollector(binary(t))
	svc := e.startService("lifecycle-steady", serviceOptions{})
	tr := newTally()
	svc.wave(tr, 20)
	svc.wave(tr, 20)
	svc.checkServiceTruth(tr)
	svc.stop()
	e.awaitExact("lifecycle-steady", tr, 90*time.Second)
}

// scenarioDeadline bounds the wait for what landed to equal the truth once
// the service has flushed and exited. It is generous because a loaded CI
// machine (load average above 5) has taken more than 40 s; a pass returns as
// soon as the totals match.
const scenarioDeadline = 90 * time.Second

// shortMetrics exports the service's cumulative metrics every 2 s, so that
// a scenario sees several points per series without waiting minutes.
var shortMetrics = serviceOptions{MetricInterval: 2 * time.Second}

// flushedMetrics is for scenarios that must know which collector saw which
// metric export: the SDK exports its metrics only when the test flushes it
// (and at its shutdown).
var flushedMetrics = serviceOptions{MetricInterval: time.Hour}

// acrossRestarts is for scenarios that restart the collector under the
// service: OTLP/HTTP, whose JavaScript exporter retries a refused
// connection, where its gRPC exporter drops any batch sent while the
// collector is down (the SDK's loss, which these tests do not measure).
var acrossRestarts = serviceOptions{MetricInterval: 2 * time.Second, HTTPProtobuf: true}

// The service restarts (a new process: new start times, a new
// service.instance.id) while the collector keeps running; http/protobuf.
func TestLifecycleServiceRestart(t *testing.T) {
	const name = "lifecycle-svcrestart"
	e := newEnv(t)
	e.startCollector(binary(t))
	opts := serviceOptions{HTTPProtobuf: true, MetricInterval: 2 * time.Second}
	first, second := newTally(), newTally()
	svc := e.startService(name, opts)
	svc.wave(first, 20)
	svc.checkServiceTruth(first)
	svc.stop()
	svc = e.startService(name, opts)
	second.seq = first.seq // new jobs, not retries of the first process's
	svc.wave(second, 20)
	svc.checkServiceTruth(second)
	svc.stop()
	e.awaitExact(name, merged(first, second), scenarioDeadline)
}
