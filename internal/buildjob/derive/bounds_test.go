// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derive

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/codes"
)

func TestActiveRunsAreBounded(t *testing.T) {
	svc := newTestService(t, newOTLPSink(t))
	cfg := testConfig()
	cfg.MaxActiveJobs = 2
	d := newConnectorDeriver(cfg, t0)
	svc.status("job-1", running, at(0))
	svc.status("job-2", running, at(time.Second))
	svc.status("job-3", running, at(2*time.Second))
	d.consumeLogs(svc.logs(), at(3*time.Second))

	assert.Equal(t, int64(1), d.peekStats().evicted[evictedActive])
	ps := points(d.flush(at(10*time.Second), false))
	assert.Equal(t, int64(2), one(t, ps, metricBuildJobsActive, attrs()).value)

	// job-3 ends normally; the evicted job-1's end finds no start and is
	// counted without a duration.
	svc.status("job-3", completed, at(62*time.Second))
	svc.status("job-1", completed, at(60*time.Second))
	d.consumeLogs(svc.logs(), at(63*time.Second))
	assert.Equal(t, int64(1), d.peekStats().evicted[evictedActive], "the held end fits in the bound")
	ps = points(d.flush(at(80*time.Second), false))
	assert.Equal(t, int64(2), one(t, ps, metricBuildJobs, attrs("build.result", "success")).value)
	dur := one(t, ps, metricBuildJobDuration, attrs("build.result", "success"))
	assert.Equal(t, uint64(1), dur.count)
	assert.Equal(t, 60.0, dur.sum)
	assert.Equal(t, int64(1), one(t, ps, metricBuildJobsActive, attrs()).value)
}

func TestEndedRunMemoryIsBounded(t *testing.T) {
	svc := newTestService(t, newOTLPSink(t))
	cfg := testConfig()
	cfg.MaxActiveJobs = 2
	d := newConnectorDeriver(cfg, t0)
	batches := map[string]ptrace.Traces{}
	for _, id := range []string{"job-1", "job-2", "job-3"} {
		svc.jobSpan(id, at(0), at(10*time.Second), codes.Unset)
		batches[id] = svc.traces()
		d.consumeTraces(batches[id], at(11*time.Second))
	}
	assert.Equal(t, int64(1), d.peekStats().evicted[evictedEnded], "job-1 is forgotten")

	// Redelivered: the runs still remembered are recognized; the forgotten
	// one is counted again (the documented cost of the bound).
	d.consumeTraces(batches["job-3"], at(12*time.Second))
	d.consumeTraces(batches["job-2"], at(12*time.Second))
	assert.Equal(t, int64(2), d.peekStats().deduplicated)
	d.consumeTraces(batches["job-1"], at(12*time.Second))
	ps := points(d.flush(at(20*time.Second), false))
	assert.Equal(t, int64(4), one(t, ps, metricBuildJobs, attrs("build.result", "success")).value)
}

func TestEndedRunsAreForgottenAfterJobTimeout(t *testing.T) {
	svc := newTestService(t, newOTLPSink(t))
	d := newConnectorDeriver(testConfig(), t0)
	svc.jobSpan("job-1", at(0), at(10*time.Second), codes.Unset)
	d.consumeTraces(svc.traces(), at(11*time.Second))
	d.flush(at(20*time.Second), false)
	require.Equal(t, 1, d.jobs.Jobs())
	d.flush(at(11*time.Second+30*time.Minute), false)
	assert.Zero(t, d.jobs.Jobs())
	assert.Zero(t, d.jobs.EndedRuns())
}
