// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derive

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

func TestStageSpans(t *testing.T) {
	svc := newTestService(t, newOTLPSink(t))
	d := newConnectorDeriver(testConfig(), t0)

	svc.stageSpan("job-1", "download", at(0), at(20*time.Second), codes.Unset)
	svc.stageSpan("job-1", "gpu_build", at(20*time.Second), at(140*time.Second), codes.Unset)
	svc.stageSpan("job-1", "gpu_to_cpu", at(140*time.Second), at(150*time.Second), codes.Ok)
	svc.stageSpan("job-1", "upload", at(150*time.Second), at(155*time.Second), codes.Error)
	svc.stageSpan("job-2", "download", at(0), at(0.5e9), codes.Unset)
	svc.stageSpan("job-3", "download", at(0), at(4*time.Second), codes.Error, attribute.String("build.stage.result", "cancellation"))
	d.consumeTraces(svc.traces(), at(160*time.Second))

	ps := points(d.flush(at(160*time.Second), false))
	download := one(t, ps, metricBuildStageRuns, attrs("build.stage", "download", "build.result", "success"))
	assert.Equal(t, int64(2), download.value)
	assert.Equal(t, "{run}", download.unit)
	dd := one(t, ps, metricBuildStageDuration, attrs("build.stage", "download", "build.result", "success"))
	assert.Equal(t, uint64(2), dd.count)
	assert.Equal(t, 20.5, dd.sum)
	assert.Equal(t, 0.5, dd.min)
	assert.Equal(t, 20.0, dd.max)
	assert.Equal(t, defaultStageDurationBuckets, dd.bounds)
	// 0.5 s lies in (0.25, 0.5], 20 s in (10, 30].
	want := make([]uint64, len(defaultStageDurationBuckets)+1)
	want[2], want[7] = 1, 1
	assert.Equal(t, want, dd.buckets)

	assert.Equal(t, 120.0, one(t, ps, metricBuildStageDuration, attrs("build.stage", "gpu_build", "build.result", "success")).sum)
	assert.Equal(t, int64(1), one(t, ps, metricBuildStageRuns, attrs("build.stage", "gpu_to_cpu", "build.result", "success")).value)
	assert.Equal(t, int64(1), one(t, ps, metricBuildStageRuns, attrs("build.stage", "upload", "build.result", "failure")).value)
	assert.Equal(t, int64(1), one(t, ps, metricBuildStageRuns, attrs("build.stage", "download", "build.result", "cancellation")).value)
	assert.Equal(t, int64(6), total(ps, metricBuildStageRuns, nil))
	assert.Empty(t, matching(ps, metricBuildJobs, nil), "stage spans carrying build.job.id are not job spans")
}

func TestSpanNameRules(t *testing.T) {
	svc := newTestService(t, newOTLPSink(t))
	cfg := testConfig()
	cfg.JobSpanNames = []string{"build_index"}
	cfg.StageSpanNames = []StageSpanName{{SpanName: "s3.get_object", Stage: "download"}, {SpanName: "cagra.build", Stage: "gpu_build"}}
	d := newConnectorDeriver(cfg, t0)

	// A service that cannot set attributes: only names.
	svc.span("build_index", at(0), at(100*time.Second), spanOpts{})
	svc.span("build_index", at(0), at(50*time.Second), spanOpts{status: codes.Error})
	svc.span("s3.get_object", at(0), at(10*time.Second), spanOpts{kind: trace.SpanKindClient})
	svc.span("cagra.build", at(10*time.Second), at(90*time.Second), spanOpts{})
	// A name rule gives the stage even when the span carries a job id.
	svc.span("cagra.build", at(10*time.Second), at(20*time.Second), spanOpts{attrs: []attribute.KeyValue{attribute.String("build.job.id", "job-9")}})
	svc.span("unrelated", at(0), at(time.Second), spanOpts{})
	traces := svc.traces()
	d.consumeTraces(traces, at(101*time.Second))
	d.consumeTraces(traces, at(102*time.Second)) // redelivered

	ps := points(d.flush(at(110*time.Second), false))
	assert.Equal(t, int64(1), one(t, ps, metricBuildJobs, attrs("build.result", "success")).value)
	assert.Equal(t, int64(1), one(t, ps, metricBuildJobs, attrs("build.result", "failure")).value)
	assert.Equal(t, 100.0, one(t, ps, metricBuildJobDuration, attrs("build.result", "success")).sum)
	assert.Equal(t, int64(1), one(t, ps, metricBuildStageRuns, attrs("build.stage", "download", "build.result", "success")).value)
	gpu := one(t, ps, metricBuildStageDuration, attrs("build.stage", "gpu_build", "build.result", "success"))
	assert.Equal(t, uint64(2), gpu.count)
	assert.Equal(t, 90.0, gpu.sum)
	assert.Equal(t, int64(5), d.peekStats().deduplicated)
}

func TestAPIRequestsFromServerSpans(t *testing.T) {
	svc := newTestService(t, newOTLPSink(t))
	d := newConnectorDeriver(testConfig(), t0)

	ms := time.Millisecond
	svc.request("POST", "/_build", 202, at(0), at(250*ms))
	svc.request("POST", "/_build", 202, at(0), at(750*ms))
	svc.request("POST", "/_build", 400, at(0), at(5*ms))
	svc.request("GET", "/_status/{job_id}", 200, at(0), at(10*ms))
	svc.request("GET", "/_status/{job_id}", 404, at(0), at(10*ms))
	svc.request("GET", "/_status/{job_id}", 503, at(0), at(2*time.Second))
	svc.request("GET", "/_status/{job_id}", 304, at(0), at(ms))
	// A status poll tagged with the job id is still only an API request.
	svc.request("GET", "/_status/{job_id}", 200, at(0), at(10*ms), attribute.String("build.job.id", "job-1"))
	// Methods outside the known set fold into _OTHER.
	svc.request("PURGE", "/_build", 405, at(0), at(ms))
	// Older semantic conventions (opentelemetry-instrumentation-fastapi's default).
	svc.span("GET /health", at(0), at(2*ms), spanOpts{kind: trace.SpanKindServer, attrs: []attribute.KeyValue{
		attribute.String("http.method", "GET"), attribute.String("http.route", "/health"), attribute.Int("http.status_code", 200),
	}})
	// No route (an unmatched path): counted without http.route, never by url.path.
	svc.span("GET", at(0), at(ms), spanOpts{kind: trace.SpanKindServer, attrs: []attribute.KeyValue{
		attribute.String("http.request.method", "GET"), attribute.String("url.path", "/_status/abc123"), attribute.Int("http.response.status_code", 404),
	}})
	// A status code sent as a string.
	svc.span("GET /_status/{job_id}", at(0), at(ms), spanOpts{kind: trace.SpanKindServer, attrs: []attribute.KeyValue{
		attribute.String("http.request.method", "GET"), attribute.String("http.route", "/_status/{job_id}"), attribute.String("http.response.status_code", "500"),
	}})
	// Not API requests: a CLIENT span, a SERVER span that is not HTTP.
	svc.span("GET s3", at(0), at(ms), spanOpts{kind: trace.SpanKindClient, attrs: []attribute.KeyValue{
		attribute.String("http.request.method", "GET"), attribute.Int("http.response.status_code", 200),
	}})
	svc.span("grpc.Health/Check", at(0), at(ms), spanOpts{kind: trace.SpanKindServer, attrs: []attribute.KeyValue{attribute.String("rpc.system", "grpc")}})
	// Malformed: no status code, a status code out of range.
	svc.span("GET /x", at(0), at(ms), spanOpts{kind: trace.SpanKindServer, attrs: []attribute.KeyValue{attribute.String("http.request.method", "GET")}})
	svc.span("GET /y", at(0), at(ms), spanOpts{kind: trace.SpanKindServer, attrs: []attribute.KeyValue{
		attribute.String("http.request.method", "GET"), attribute.Int("http.response.status_code", 999),
	}})
	d.consumeTraces(svc.traces(), at(3*time.Second))

	ps := points(d.flush(at(3*time.Second), false))
	build := one(t, ps, metricAPIRequests, attrs("http.route", "/_build", "http.request.method", "POST", "http.response.status_class", "2xx"))
	assert.Equal(t, int64(2), build.value)
	assert.Equal(t, "{request}", build.unit)
	bd := one(t, ps, metricAPIRequestDuration, attrs("http.route", "/_build", "http.request.method", "POST", "http.response.status_class", "2xx"))
	assert.Equal(t, uint64(2), bd.count)
	assert.Equal(t, 1.0, bd.sum)
	assert.Equal(t, defaultAPIDurationBuckets, bd.bounds)
	// 0.25 s is the bound of (0.1, 0.25]; 0.75 s of (0.5, 0.75].
	want := make([]uint64, len(defaultAPIDurationBuckets)+1)
	want[6], want[8] = 1, 1
	assert.Equal(t, want, bd.buckets)

	assert.Equal(t, int64(1), one(t, ps, metricAPIRequests, attrs("http.route", "/_build", "http.request.method", "POST", "http.response.status_class", "4xx")).value)
	assert.Equal(t, int64(2), one(t, ps, metricAPIRequests, attrs("http.route", "/_status/{job_id}", "http.request.method", "GET", "http.response.status_class", "2xx")).value)
	assert.Equal(t, int64(1), one(t, ps, metricAPIRequests, attrs("http.route", "/_status/{job_id}", "http.request.method", "GET", "http.response.status_class", "4xx")).value)
	assert.Equal(t, int64(2), one(t, ps, metricAPIRequests, attrs("http.route", "/_status/{job_id}", "http.request.method", "GET", "http.response.status_class", "5xx")).value)
	assert.Equal(t, int64(1), one(t, ps, metricAPIRequests, attrs("http.route", "/_status/{job_id}", "http.request.method", "GET", "http.response.status_class", "3xx")).value)
	assert.Equal(t, int64(1), one(t, ps, metricAPIRequests, attrs("http.route", "/_build", "http.request.method", "_OTHER", "http.response.status_class", "4xx")).value)
	assert.Equal(t, int64(1), one(t, ps, metricAPIRequests, attrs("http.route", "/health", "http.request.method", "GET", "http.response.status_class", "2xx")).value)
	assert.Equal(t, int64(1), one(t, ps, metricAPIRequests, attrs("http.request.method", "GET", "http.response.status_class", "4xx")).value)
	assert.Equal(t, int64(12), total(ps, metricAPIRequests, nil))
	assert.Equal(t, int64(12), total(ps, metricAPIRequestDuration, nil))
	assert.Empty(t, matching(ps, metricBuildJobs, nil))

	assert.Equal(t, int64(1), d.peekStats().skipped[skipMissingAttribute])
	assert.Equal(t, int64(1), d.peekStats().skipped[skipInvalidValue])
}

func TestAPIRequestsFromSpansCanBeTurnedOff(t *testing.T) {
	svc := newTestService(t, newOTLPSink(t))
	cfg := testConfig()
	cfg.APIRequestsFromSpans = false
	d := newConnectorDeriver(cfg, t0)
	svc.request("POST", "/_build", 202, at(0), at(time.Second))
	// Turned off, an HTTP server span is not mistaken for a job either.
	svc.request("GET", "/_status/{job_id}", 200, at(0), at(time.Second), attribute.String("build.job.id", "job-1"))
	d.consumeTraces(svc.traces(), at(2*time.Second))
	assert.Empty(t, points(d.flush(at(2*time.Second), false)))
}
