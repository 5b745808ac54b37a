// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derive

import (
	"context"
	"maps"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/gpubuild/otelcol-gpubuild/internal/buildjob/derivestate"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
)

// The derivation state is read back from disk, where anything can have
// happened to it. Whatever one entry of the fixture holds, the sidecar
// starts, goes on and shuts down without a crash, and counts no run twice:
// the fixture's state holds two successful runs not yet flushed and one
// active, and one more run completes after the start, so at most four.
func FuzzRestoredDerivationState(f *testing.F) {
	fixture := loadFixture(f)
	keys := slices.Sorted(maps.Keys(fixture))
	for i, k := range keys {
		f.Add(uint8(i), fixture[k])
	}
	f.Add(uint8(0), []byte{})
	f.Add(uint8(1), []byte{derivestate.FormatV1})

	f.Fuzz(func(t *testing.T, entry uint8, value []byte) {
		entries := loadFixture(t)
		entries[keys[int(entry)%len(keys)]] = value
		dir := t.TempDir()
		writeEntries(t, dir, entries)

		clock := func() time.Time { return fixtureTime.Add(time.Minute) }
		svc := newTestService(t, newOTLPSink(t), attribute.String("service.name", "vector-index-build"))
		sink := new(consumertest.MetricsSink)
		s := startSidecar(t, dir, nil, sink, clock)
		svc.status("job-9", completed, fixtureTime.Add(50*time.Second))
		svc.status("job-10", running, fixtureTime.Add(10*time.Second))
		svc.status("job-10", completed, fixtureTime.Add(40*time.Second))
		s.consumeLogs(svc)
		require.NoError(t, s.sigterm())

		if n := landed(metricBuildJobs, success, sink); n > 4 {
			t.Fatalf("%d successful runs counted, at most 4 happened", n)
		}
		for _, md := range sink.AllMetrics() {
			for _, p := range points(md) {
				if p.value < 0 {
					t.Fatalf("%s %v: %d", p.metric, p.attrs, p.value)
				}
			}
		}
	})
}

// What the service sends is not ours to trust: any job id, status,
// stage, route, status code and times. The derivation never crashes, never
// counts more runs than ended, and never derives a negative count or
// duration.
func FuzzServiceTelemetry(f *testing.F) {
	base := fixtureTime.UnixNano()
	f.Add("job-1", running, base, "job-1", completed, base+int64(40*time.Second), base, base+int64(40*time.Second), "gpu_build", "/_build", int64(200), "POST")
	f.Add("job-2", failed, base, "", "", int64(0), base+1, base, "", "/_status/{job_id}", int64(503), "GET")
	f.Add("j", completed, int64(-1), "j", running, int64(1)<<62, int64(0), int64(-1)<<62, "upload", "", int64(-7), "")

	f.Fuzz(func(t *testing.T, id1, status1 string, ts1 int64, id2, status2 string, ts2, spanStart, spanEnd int64,
		stage, route string, code int64, method string) {
		ctx := context.Background()
		sink := new(consumertest.MetricsSink)
		p := newConnectorPair(t, testConnectorFactory(), component.NewID(testType), testConfig(), sink)
		p.start(t)

		ld := plog.NewLogs()
		rl := ld.ResourceLogs().AppendEmpty()
		rl.Resource().Attributes().PutStr("service.name", "vector-index-build")
		records := rl.ScopeLogs().AppendEmpty().LogRecords()
		for _, r := range []struct {
			id, status string
			ts         int64
		}{{id1, status1, ts1}, {id2, status2, ts2}} {
			lr := records.AppendEmpty()
			lr.SetTimestamp(pcommon.Timestamp(r.ts))
			lr.Attributes().PutStr("build.job.id", r.id)
			lr.Attributes().PutStr("build.job.status", r.status)
		}
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", "vector-index-build")
		spans := rs.ScopeSpans().AppendEmpty().Spans()
		for i, name := range []string{"index_build", stage, method + " " + route} {
			sp := spans.AppendEmpty()
			sp.SetName(name)
			sp.SetTraceID(pcommon.TraceID{byte(len(id1)), 1})
			sp.SetSpanID(pcommon.SpanID{byte(i + 1)})
			sp.SetStartTimestamp(pcommon.Timestamp(spanStart))
			sp.SetEndTimestamp(pcommon.Timestamp(spanEnd))
			switch i {
			case 0:
				sp.Attributes().PutStr("build.job.id", id1)
			case 1:
				sp.Attributes().PutStr("build.job.id", id2)
				sp.Attributes().PutStr("build.stage", stage)
			case 2:
				sp.SetKind(ptrace.SpanKindServer)
				sp.Attributes().PutStr("http.request.method", method)
				sp.Attributes().PutStr("http.route", route)
				sp.Attributes().PutInt("http.response.status_code", code)
			}
		}
		_ = p.logs.ConsumeLogs(ctx, ld)
		_ = p.traces.ConsumeTraces(ctx, td)
		require.NoError(t, p.traces.Shutdown(ctx))
		require.NoError(t, p.logs.Shutdown(ctx))

		// Two records and one job span can end at most three runs.
		if n := landed(metricBuildJobs, nil, sink); n > 3 {
			t.Fatalf("%d runs counted", n)
		}
		for _, md := range sink.AllMetrics() {
			for _, pt := range points(md) {
				if pt.value < 0 || pt.sum < 0 || pt.min < 0 || math.IsNaN(pt.sum) {
					t.Fatalf("%s %v: value %d, sum %g, min %g", pt.metric, pt.attrs, pt.value, pt.sum, pt.min)
				}
			}
		}
	})
}
