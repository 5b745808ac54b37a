// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derive

import (
	"context"
	"fmt"
	"hash/fnv"
	"runtime"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/benchmem"
)

// The benchmarks build pdata the way the OTel Python SDK and its FastAPI
// instrumentation emit it (resource, scope, attribute set), directly rather
// than through an exporter, so that setup stays cheap.

const benchBatch = 1000 // spans or records per ConsumeTraces/ConsumeLogs call

func benchResource(res pcommon.Resource) {
	a := res.Attributes()
	a.PutStr("service.name", "vector-index-build")
	a.PutStr("service.instance.id", "0b6c0f5e-6f0e-4b8e-9a51-3c1d2f7a9e10")
	a.PutStr("service.version", "1.4.2")
	a.PutStr("telemetry.sdk.language", "python")
	a.PutStr("telemetry.sdk.name", "opentelemetry")
	a.PutStr("telemetry.sdk.version", "1.27.0")
	a.PutStr("deployment.environment.name", "prod")
}

func benchIDs(i int) (pcommon.TraceID, pcommon.SpanID) {
	var tid pcommon.TraceID
	var sid pcommon.SpanID
	for k := range 8 {
		tid[k] = byte(i >> (8 * k))
		sid[k] = byte(i >> (8 * k))
	}
	tid[15] = 0x7f
	return tid, sid
}

// apiSpanBatch is benchBatch HTTP server spans: POST /_build and status
// polls with a realistic status code mix.
func apiSpanBatch() ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	benchResource(rs.Resource())
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("opentelemetry.instrumentation.fastapi")
	ss.Scope().SetVersion("0.48b0")
	codes := []int64{200, 200, 200, 202, 404, 500, 200, 304}
	start := pcommon.NewTimestampFromTime(t0)
	for i := range benchBatch {
		sp := ss.Spans().AppendEmpty()
		tid, sid := benchIDs(i)
		sp.SetTraceID(tid)
		sp.SetSpanID(sid)
		sp.SetKind(ptrace.SpanKindServer)
		sp.SetStartTimestamp(start)
		sp.SetEndTimestamp(start + pcommon.Timestamp((i%50+1)*int(time.Millisecond)))
		a := sp.Attributes()
		route, method, path := "/_status/{job_id}", "GET", fmt.Sprintf("/_status/job-%d", i)
		if i%4 == 0 {
			route, method, path = "/_build", "POST", "/_build"
		}
		sp.SetName(method + " " + route)
		a.PutStr("http.request.method", method)
		a.PutStr("url.scheme", "http")
		a.PutStr("url.path", path)
		a.PutStr("http.route", route)
		a.PutStr("server.address", "127.0.0.1")
		a.PutInt("server.port", 8080)
		a.PutStr("network.protocol.version", "1.1")
		a.PutStr("user_agent.original", "python-requests/2.32.3")
		a.PutStr("client.address", "10.0.3.17")
		a.PutInt("http.response.status_code", codes[i%len(codes)])
	}
	return td
}

// buildMixBatches returns batches of what one build emits: a job span, four
// stage spans and four HTTP server spans per job, with distinct job ids
// across batches so that each job is a new run.
func buildMixBatches(n int) []ptrace.Traces {
	return buildMixBatchesWithIDs(n, func(id int) string { return fmt.Sprintf("a3f9c2e1%08x", id) })
}

// hashedJobID is a job id as the build service makes them: a hash, so
// consecutive jobs are far apart in id order.
func hashedJobID(id int) string {
	h := fnv.New64a()
	_, _ = fmt.Fprint(h, id)
	return fmt.Sprintf("%016x", h.Sum64())
}

// buildMixBatchesWithIDs is buildMixBatches with the job ids jobID gives.
func buildMixBatchesWithIDs(n int, jobID func(int) string) []ptrace.Traces {
	stages := []string{"download", "gpu_build", "gpu_to_cpu", "upload"}
	const perJob = 9
	out := make([]ptrace.Traces, n)
	start := pcommon.NewTimestampFromTime(t0)
	id := 0
	for b := range out {
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		benchResource(rs.Resource())
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName("build-service")
		for range benchBatch / perJob {
			job := jobID(id)
			jobSpan := ss.Spans().AppendEmpty()
			tid, sid := benchIDs(id * 16)
			jobSpan.SetTraceID(tid)
			jobSpan.SetSpanID(sid)
			jobSpan.SetName("index_build")
			jobSpan.SetStartTimestamp(start)
			jobSpan.SetEndTimestamp(start + pcommon.Timestamp(200*time.Second))
			jobSpan.Attributes().PutStr("build.job.id", job)
			jobSpan.Attributes().PutStr("build.engine", "cagra")
			jobSpan.Attributes().PutStr("build.data_type", "float32")
			jobSpan.Attributes().PutStr("tenant.id", "tenant-3")
			for k, stage := range stages {
				sp := ss.Spans().AppendEmpty()
				_, sid := benchIDs(id*16 + k + 1)
				sp.SetTraceID(tid)
				sp.SetSpanID(sid)
				sp.SetParentSpanID(jobSpan.SpanID())
				sp.SetName(stage)
				sp.SetStartTimestamp(start + pcommon.Timestamp(k*40)*pcommon.Timestamp(time.Second))
				sp.SetEndTimestamp(start + pcommon.Timestamp(k*40+39)*pcommon.Timestamp(time.Second))
				sp.Attributes().PutStr("build.stage", stage)
				sp.Attributes().PutStr("build.job.id", job)
				sp.Attributes().PutStr("build.engine", "cagra")
				sp.Attributes().PutStr("build.data_type", "float32")
			}
			for k := range 4 {
				sp := ss.Spans().AppendEmpty()
				tid, sid := benchIDs(id*16 + 8 + k)
				sp.SetTraceID(tid)
				sp.SetSpanID(sid)
				sp.SetKind(ptrace.SpanKindServer)
				sp.SetStartTimestamp(start)
				sp.SetEndTimestamp(start + pcommon.Timestamp(12*time.Millisecond))
				route, method, code := "/_status/{job_id}", "GET", int64(200)
				if k == 0 {
					route, method, code = "/_build", "POST", 202
				}
				sp.SetName(method + " " + route)
				sp.Attributes().PutStr("http.request.method", method)
				sp.Attributes().PutStr("url.path", "/_status/"+job)
				sp.Attributes().PutStr("http.route", route)
				sp.Attributes().PutInt("http.response.status_code", code)
			}
			id++
		}
		out[b] = td
	}
	return out
}

// statusLogBatches returns batches of RUNNING and COMPLETED records with
// distinct job ids across batches.
func statusLogBatches(n int) []plog.Logs {
	out := make([]plog.Logs, n)
	start := pcommon.NewTimestampFromTime(t0)
	id := 0
	for b := range out {
		ld := plog.NewLogs()
		rl := ld.ResourceLogs().AppendEmpty()
		benchResource(rl.Resource())
		sl := rl.ScopeLogs().AppendEmpty()
		sl.Scope().SetName("build_service.jobs")
		for range benchBatch / 2 {
			job := fmt.Sprintf("a3f9c2e1%08x", id)
			for k, status := range []string{running, completed} {
				lr := sl.LogRecords().AppendEmpty()
				lr.SetTimestamp(start + pcommon.Timestamp(k*200)*pcommon.Timestamp(time.Second))
				lr.SetObservedTimestamp(lr.Timestamp())
				lr.SetSeverityNumber(plog.SeverityNumberInfo)
				lr.SetSeverityText("INFO")
				lr.Body().SetStr("job " + job + " is " + status)
				lr.Attributes().PutStr("build.job.id", job)
				lr.Attributes().PutStr("build.job.status", status)
				lr.Attributes().PutStr("build.engine", "ivf_pq")
				lr.Attributes().PutStr("build.data_type", "float16")
			}
			id++
		}
		out[b] = ld
	}
	return out
}

// benchConfig bounds the state below one cycle of the benchmark batches,
// so that a job id seen again one cycle later is a new run (its old run was
// evicted from the ended-run memory), as in a steady stream of new jobs.
func benchConfig() *jobSettings {
	cfg := testConfig()
	cfg.Dimensions = []string{"build.engine", "build.data_type"}
	cfg.MaxActiveJobs = 1000
	return cfg
}

// reportPerItem reports throughput and per-item cost; one op is one batch.
func reportPerItem(b *testing.B, unit string, perOp int, mallocs uint64) {
	items := float64(b.N) * float64(perOp)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/items, "ns/"+unit)
	b.ReportMetric(float64(mallocs)/items, "allocs/"+unit)
	b.ReportMetric(items/b.Elapsed().Seconds(), unit+"s/s")
}

func mallocs() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.Mallocs
}

// BenchmarkDeriveAPISpans: HTTP server spans, the bulk of a busy service's spans.
func BenchmarkDeriveAPISpans(b *testing.B) {
	d := newConnectorDeriver(benchConfig(), t0)
	td := apiSpanBatch()
	now := at(time.Second)
	d.consumeTraces(td, now) // create the series
	b.ReportAllocs()
	before := mallocs()
	b.ResetTimer()
	for range b.N {
		d.consumeTraces(td, now)
	}
	b.StopTimer()
	reportPerItem(b, "span", benchBatch, mallocs()-before)
}

// BenchmarkDeriveBuildSpans: job, stage and API spans of whole builds, each
// job a new run (job state, deduplication memory and evictions included).
func BenchmarkDeriveBuildSpans(b *testing.B) {
	d := newConnectorDeriver(benchConfig(), t0)
	batches := buildMixBatches(64)
	spans := batches[0].SpanCount()
	now := at(time.Second)
	b.ReportAllocs()
	before := mallocs()
	b.ResetTimer()
	for i := range b.N {
		d.consumeTraces(batches[i%len(batches)], now)
		if i%len(batches) == len(batches)-1 {
			d.flush(now, false) // as the flush interval would
		}
	}
	b.StopTimer()
	reportPerItem(b, "span", spans, mallocs()-before)
}

// BenchmarkDeriveStatusLogs: RUNNING and COMPLETED records, each pair a new run.
func BenchmarkDeriveStatusLogs(b *testing.B) {
	d := newConnectorDeriver(benchConfig(), t0)
	batches := statusLogBatches(64)
	now := at(time.Second)
	b.ReportAllocs()
	before := mallocs()
	b.ResetTimer()
	for i := range b.N {
		d.consumeLogs(batches[i%len(batches)], now)
		if i%len(batches) == len(batches)-1 {
			d.flush(now, false)
		}
	}
	b.StopTimer()
	reportPerItem(b, "record", benchBatch, mallocs()-before)
}

// processorBatch is pointsPerBatch cumulative http.server.request.duration
// points of distinct routes.
func processorBatch(pointsPerBatch int) (pmetric.Metrics, pmetric.HistogramDataPointSlice) {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	benchResource(rm.Resource())
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("http.server.request.duration")
	m.SetUnit("s")
	h := m.SetEmptyHistogram()
	h.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	for i := range pointsPerBatch {
		dp := h.DataPoints().AppendEmpty()
		dp.SetStartTimestamp(pcommon.NewTimestampFromTime(t0))
		dp.Attributes().PutStr("http.request.method", "GET")
		dp.Attributes().PutStr("http.route", fmt.Sprintf("/route/%d", i))
		dp.Attributes().PutInt("http.response.status_code", 200)
		dp.Attributes().PutStr("url.scheme", "http")
		dp.ExplicitBounds().FromRaw(defaultAPIDurationBuckets)
		dp.BucketCounts().FromRaw(make([]uint64, len(defaultAPIDurationBuckets)+1))
	}
	return md, h.DataPoints()
}

// nextExport advances every point of the batch to export i: one more
// request per series, one millisecond later.
func nextExport(points pmetric.HistogramDataPointSlice, i int) time.Time {
	now := t0.Add(time.Duration(i+1) * time.Millisecond)
	for k := 0; k < points.Len(); k++ {
		points.At(k).SetCount(uint64(i + 1))
		points.At(k).SetTimestamp(pcommon.NewTimestampFromTime(now))
	}
	return now
}

// BenchmarkProcessorHistograms: cumulative http.server.request.duration
// points, as the SDKs export them, each export one request more per series.
func BenchmarkProcessorHistograms(b *testing.B) {
	const pointsPerBatch = 100
	d := newProcessorDeriver(defaultOutput(), DefaultCumulativeConfig(), t0, nil)
	md, points := processorBatch(pointsPerBatch)
	b.ReportAllocs()
	before := mallocs()
	b.ResetTimer()
	for i := range b.N {
		now := nextExport(points, i)
		d.consumeHTTPMetrics(md, now)
	}
	b.StopTimer()
	reportPerItem(b, "point", pointsPerBatch, mallocs()-before)
}

// BenchmarkConnectorAPISpans: the same batch through the connector's
// ConsumeTraces (lock, own telemetry), as the pipeline calls it.
func BenchmarkConnectorAPISpans(b *testing.B) {
	ctx := context.Background()
	set := connectortest.NewNopSettings(testType)
	c, err := testConnectorFactory().CreateTracesToMetrics(ctx, set, benchConfig(), consumertest.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	if err = c.Start(ctx, componenttest.NewNopHost()); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = c.Shutdown(ctx) }()
	td := apiSpanBatch()
	b.ReportAllocs()
	before := mallocs()
	b.ResetTimer()
	for range b.N {
		if err := c.ConsumeTraces(ctx, td); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportPerItem(b, "span", benchBatch, mallocs()-before)
}

// BenchmarkRunMemory reports the heap the run memory keeps per remembered
// run once 10,000 jobs (two dimensions each, all alike) have ended, in
// bytes and in objects (each one more for a collection to mark).
func BenchmarkRunMemory(b *testing.B) {
	const jobs = 10_000
	batches := statusLogBatches(jobs / (benchBatch / 2))
	var bytes, objects int64
	for b.Loop() {
		bytes, objects = benchmem.RetainedWithObjects(func() any {
			cfg := benchConfig()
			cfg.MaxActiveJobs = jobs
			d := newConnectorDeriver(cfg, t0)
			for _, ld := range batches {
				d.consumeLogs(ld, at(time.Second))
			}
			if n := d.jobs.EndedRuns(); n != jobs {
				b.Fatalf("%d runs remembered", n)
			}
			return d
		})
	}
	runtime.KeepAlive(batches)
	b.ReportMetric(float64(bytes)/jobs, "heap_bytes/run")
	b.ReportMetric(float64(objects)/jobs, "heap_objects/run")
}
