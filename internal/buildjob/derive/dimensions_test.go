// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derive

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
)

func TestDimensions(t *testing.T) {
	sink := newOTLPSink(t)
	svc := newTestService(t, sink,
		attribute.String("service.name", "vector-index-build"),
		attribute.String("deployment.environment.name", "prod"),
		attribute.String("build.engine", "resource-default"))
	cfg := testConfig()
	cfg.Dimensions = []string{"build.engine", "deployment.environment.name", "build.data_type"}
	d := newConnectorDeriver(cfg, t0)

	// The start record lacks build.data_type; the end record has it.
	svc.status("job-1", running, at(0), attribute.String("build.engine", "cagra"))
	svc.status("job-1", completed, at(10*time.Second), attribute.String("build.engine", "cagra"), attribute.String("build.data_type", "float16"))
	svc.status("job-2", running, at(0))
	svc.status("job-2", completed, at(20*time.Second))
	d.consumeLogs(svc.logs(), at(30*time.Second))
	svc.stageSpan("job-1", "gpu_build", at(time.Second), at(5*time.Second), codes.Unset, attribute.String("build.engine", "ivf_pq"))
	d.consumeTraces(svc.traces(), at(30*time.Second))

	ps := points(d.flush(at(30*time.Second), false))
	one(t, ps, metricBuildJobs, attrs("build.result", "success", "build.engine", "cagra", "build.data_type", "float16", "deployment.environment.name", "prod"))
	one(t, ps, metricBuildJobs, attrs("build.result", "success", "build.engine", "resource-default", "deployment.environment.name", "prod"))
	one(t, ps, metricBuildStageRuns, attrs("build.stage", "gpu_build", "build.result", "success", "build.engine", "ivf_pq", "deployment.environment.name", "prod"))
	for _, p := range ps {
		assert.NotContains(t, p.attrs, "build.job.id", "the job id never becomes a dimension")
	}
}

// Runs with the same dimensions share one copy of them; a later record
// that fills a dimension of one run gives that run its own tuple and
// leaves the runs that shared it alone.
func TestRunsShareDimensionsAndFillingOneLeavesItsNeighboursAlone(t *testing.T) {
	sink := newOTLPSink(t)
	svc := newTestService(t, sink)
	cfg := testConfig()
	cfg.Dimensions = []string{"build.engine", "build.data_type"}
	d := newConnectorDeriver(cfg, t0)

	for _, job := range []string{"job-1", "job-2", "job-3"} {
		svc.status(job, running, at(0), attribute.String("build.engine", "cagra"))
	}
	d.consumeLogs(svc.logs(), at(time.Second))
	var tuples [][]dimValue
	d.jobs.ForEachActive(func(p runPayload) { tuples = append(tuples, p.dims) })
	require.Len(t, tuples, 3)
	for _, dims := range tuples {
		require.Len(t, dims, 2)
		assert.Same(t, &tuples[0][0], &dims[0], "one copy of the tuple")
	}

	svc.status("job-1", completed, at(10*time.Second), attribute.String("build.engine", "cagra"), attribute.String("build.data_type", "float16"))
	svc.status("job-2", completed, at(20*time.Second), attribute.String("build.engine", "cagra"))
	d.consumeLogs(svc.logs(), at(30*time.Second))
	ps := points(d.flush(at(30*time.Second), false))
	assert.Equal(t, int64(1), one(t, ps, metricBuildJobs, attrs("build.result", "success", "build.engine", "cagra", "build.data_type", "float16")).value)
	assert.Equal(t, int64(1), one(t, ps, metricBuildJobs, attrs("build.result", "success", "build.engine", "cagra")).value, "job-2 kept its tuple")
	d.jobs.ForEachActive(func(p runPayload) {
		assert.Equal(t, dimUnset, p.dims[1].kind, "job-3 still has no data type")
	})
}

func TestServicesAreKeptApart(t *testing.T) {
	sink := newOTLPSink(t)
	a := newTestService(t, sink, attribute.String("service.name", "builder-a"))
	b := newTestService(t, sink, attribute.String("service.name", "builder-b"))
	d := newConnectorDeriver(testConfig(), t0)
	// The same job id on two services: two different jobs.
	a.status("job-1", running, at(0))
	b.status("job-1", running, at(0))
	a.status("job-1", completed, at(10*time.Second))
	b.status("job-1", failed, at(20*time.Second))
	d.consumeLogs(sink.takeLogs(), at(30*time.Second))

	ps := points(d.flush(at(30*time.Second), false))
	ok := one(t, ps, metricBuildJobs, attrs("build.result", "success"))
	assert.Equal(t, "builder-a", ok.resource["service.name"])
	ko := one(t, ps, metricBuildJobs, attrs("build.result", "failure"))
	assert.Equal(t, "builder-b", ko.resource["service.name"])
	assert.Equal(t, 20.0, one(t, ps, metricBuildJobDuration, attrs("build.result", "failure")).sum)
}

func TestCumulativeTemporality(t *testing.T) {
	svc := newTestService(t, newOTLPSink(t))
	cfg := testConfig()
	cfg.Temporality = TemporalityCumulative
	d := newConnectorDeriver(cfg, t0)

	svc.jobSpan("job-1", at(0), at(10*time.Second), codes.Unset)
	d.consumeTraces(svc.traces(), at(11*time.Second))
	ps := points(d.flush(at(20*time.Second), false))
	p := one(t, ps, metricBuildJobs, attrs("build.result", "success"))
	assert.Equal(t, pmetric.AggregationTemporalityCumulative, p.temporality)
	assert.Equal(t, int64(1), p.value)
	assert.Equal(t, ts(t0), p.start)

	svc.jobSpan("job-2", at(0), at(30*time.Second), codes.Unset)
	d.consumeTraces(svc.traces(), at(31*time.Second))
	ps = points(d.flush(at(40*time.Second), false))
	p = one(t, ps, metricBuildJobs, attrs("build.result", "success"))
	assert.Equal(t, int64(2), p.value)
	assert.Equal(t, ts(t0), p.start, "a cumulative series keeps its start")
	assert.Equal(t, ts(at(40*time.Second)), p.ts)
	h := one(t, ps, metricBuildJobDuration, attrs("build.result", "success"))
	assert.Equal(t, pmetric.AggregationTemporalityCumulative, h.temporality)
	assert.Equal(t, uint64(2), h.count)
	assert.Equal(t, 40.0, h.sum)
	assert.Equal(t, 10.0, h.min)
	assert.Equal(t, 30.0, h.max)

	// Unchanged series are repeated.
	ps = points(d.flush(at(50*time.Second), false))
	assert.Equal(t, int64(2), one(t, ps, metricBuildJobs, attrs("build.result", "success")).value)
}

func TestConfiguredStatusMapping(t *testing.T) {
	svc := newTestService(t, newOTLPSink(t))
	cfg := testConfig()
	cfg.JobStatus = map[string]string{"STARTED": StatusActionStart, "DONE": StatusActionSuccess, "DELETED": StatusActionCancellation}
	d := newConnectorDeriver(cfg, t0)
	svc.status("job-1", "STARTED", at(0))
	svc.status("job-1", "DELETED", at(12*time.Second))
	svc.status("job-2", "STARTED", at(0))
	svc.status("job-2", "DONE", at(24*time.Second))
	svc.status("job-3", running, at(0)) // not in this mapping: ignored
	d.consumeLogs(svc.logs(), at(30*time.Second))
	ps := points(d.flush(at(30*time.Second), false))
	assert.Equal(t, 12.0, one(t, ps, metricBuildJobDuration, attrs("build.result", "cancellation")).sum)
	assert.Equal(t, 24.0, one(t, ps, metricBuildJobDuration, attrs("build.result", "success")).sum)
	assert.Empty(t, matching(ps, metricBuildJobsActive, nil))
}
