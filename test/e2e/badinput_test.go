// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/buildsim"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/promtext"
)

// postOTLP sends a raw body to the collector's OTLP/HTTP listener and
// returns the status code and response body.
func postOTLP(t *testing.T, port int, path, contentType string, body []byte, headers ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d%s", port, path), bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", contentType)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(b)
}

const badService = "build-badinput"

// malformedTraces holds three malformed spans (a job id of the wrong type,
// a stage of the wrong type, a job span ending before it starts) and one
// good job span of 10 s that must still be counted.
func malformedTraces() ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", badService)
	ss := rs.ScopeSpans().AppendEmpty()
	now := time.Now()
	span := func(name string, start, end time.Time) ptrace.Span {
		s := ss.Spans().AppendEmpty()
		s.SetName(name)
		s.SetTraceID(pcommon.TraceID([16]byte{1, byte(ss.Spans().Len())}))
		s.SetSpanID(pcommon.SpanID([8]byte{2, byte(ss.Spans().Len())}))
		s.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
		s.SetEndTimestamp(pcommon.NewTimestampFromTime(end))
		s.Attributes().PutStr(buildsim.AttrEngine, "cagra")
		s.Attributes().PutStr(buildsim.AttrDataType, "float32")
		return s
	}
	span("index_build", now.Add(-time.Minute), now).Attributes().PutInt(buildsim.AttrJobID, 12345)
	st := span("download", now.Add(-time.Minute), now)
	st.Attributes().PutStr(buildsim.AttrJobID, "bad-stage")
	st.Attributes().PutBool(buildsim.AttrStage, true)
	span("index_build", now, now.Add(-time.Minute)).Attributes().PutStr(buildsim.AttrJobID, "bad-order")
	good := span("index_build", now.Add(-10*time.Second), now)
	good.Attributes().PutStr(buildsim.AttrJobID, "good-1")
	good.Attributes().PutStr(buildsim.AttrJobResult, buildsim.ResultSuccess)
	return td
}

// malformedLogs holds two malformed job status records: a status of the
// wrong type and a status without a job id.
func malformedLogs() plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", badService)
	sl := rl.ScopeLogs().AppendEmpty()
	now := pcommon.NewTimestampFromTime(time.Now())
	r := sl.LogRecords().AppendEmpty()
	r.SetTimestamp(now)
	r.Attributes().PutStr(buildsim.AttrJobID, "bad-status-type")
	r.Attributes().PutInt(buildsim.AttrJobStatus, 3)
	r = sl.LogRecords().AppendEmpty()
	r.SetTimestamp(now)
	r.Attributes().PutStr(buildsim.AttrJobStatus, buildsim.StatusRunning)
	return ld
}

const malformedRecords = 5 // 3 spans + 2 log records above

// extremeExponential is a point of a cumulative exponential histogram
// whose last bucket's index passes int32 (OTLP allows any offset), at
// scale; with a gauge that must land beside it.
func extremeExponential(scale int32, start, ts time.Time, counts ...uint64) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", badService)
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	e := ms.AppendEmpty()
	e.SetName("e2e.bad.exponential")
	e.SetUnit("s")
	eh := e.SetEmptyExponentialHistogram()
	eh.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	dp := eh.DataPoints().AppendEmpty()
	dp.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
	dp.SetTimestamp(pcommon.NewTimestampFromTime(ts))
	dp.SetScale(scale)
	dp.Positive().SetOffset(math.MaxInt32)
	dp.Positive().BucketCounts().FromRaw(counts)
	var n uint64
	for _, c := range counts {
		n += c
	}
	dp.SetCount(n)
	g := ms.AppendEmpty()
	g.SetName("e2e.bad.after")
	g.SetUnit("1")
	gp := g.SetEmptyGauge().DataPoints().AppendEmpty()
	gp.SetTimestamp(pcommon.NewTimestampFromTime(ts))
	gp.SetIntValue(int64(scale))
	return md
}

// badPoints: NaN, +Inf and -Inf (CloudWatch rejects them), a value beyond
// CloudWatch's range, and one good point that must land.
func badPoints() pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", badService)
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("e2e.bad.gauge")
	m.SetUnit("1")
	g := m.SetEmptyGauge()
	now := pcommon.NewTimestampFromTime(time.Now())
	for i, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), 1e200, 42} {
		dp := g.DataPoints().AppendEmpty()
		dp.SetTimestamp(now)
		dp.SetDoubleValue(v)
		dp.Attributes().PutInt("i", int64(i))
	}
	return md
}

// Scenario 7: bad input. Undecodable and oversize requests get a clear 4xx;
// well-formed requests with malformed records are accepted, the records
// skipped and counted, the good ones in the same request used; NaN/Inf
// points are dropped and counted; good traffic sent at the same time from
// buildsim arrives exactly, and the collector stays up.
func TestBadInput(t *testing.T) {
	e := newEnv(t, nil)
	p := e.cfg.ports

	var good *buildsim.Summary
	var goodErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		cfg := simConfig(p, buildsim.ProtocolGRPC, "build-good", 71)
		cfg.Rate = 100 // spread over the bad requests
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		good, goodErr = buildsim.Run(ctx, cfg)
	}()

	before := e.scrape()
	skipped0, _ := before.Sum("otelcol_buildjob_records_skipped", nil)
	skippedBy := func(samples promtext.Families, reason string) float64 {
		now, _ := samples.Sum("otelcol_buildjob_records_skipped", map[string]string{"reason": reason})
		was, _ := before.Sum("otelcol_buildjob_records_skipped", map[string]string{"reason": reason})
		return now - was
	}

	t.Run("undecodable and oversize requests are refused with 4xx", func(t *testing.T) {
		code, body := postOTLP(t, p.HTTP, "/v1/traces", "application/x-protobuf", []byte{0xff, 0xff, 0xff, 0xff, 0x0f, 0x0a, 0x03})
		assert.Equal(t, http.StatusBadRequest, code, "malformed protobuf: %s", body)
		code, body = postOTLP(t, p.HTTP, "/v1/metrics", "application/json", []byte(`{"resourceMetrics": [{"resource": `))
		assert.Equal(t, http.StatusBadRequest, code, "malformed JSON: %s", body)
		code, body = postOTLP(t, p.HTTP, "/v1/logs", "application/json", []byte(`{"resourceLogs": [{"scopeLogs": [{"logRecords": [{"timeUnixNano": "yesterday"}]}]}]}`))
		assert.Equal(t, http.StatusBadRequest, code, "JSON with a wrong field type: %s", body)
		code, body = postOTLP(t, p.HTTP, "/v1/traces", "application/x-protobuf", []byte("not gzip"), "Content-Encoding", "gzip")
		assert.Equal(t, http.StatusBadRequest, code, "corrupt gzip: %s", body)
		code, body = postOTLP(t, p.HTTP, "/v1/traces", "text/plain", []byte("hello"))
		assert.Equal(t, http.StatusUnsupportedMediaType, code, "unknown content type: %s", body)

		oversize := bytes.Repeat([]byte{0x0a}, (e.cfg.MaxRecvMiB<<20)+1024)
		code, body = postOTLP(t, p.HTTP, "/v1/logs", "application/x-protobuf", oversize)
		assert.Contains(t, []int{http.StatusBadRequest, http.StatusRequestEntityTooLarge}, code, "oversize body: %s", body)

		conn, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", p.GRPC), grpc.WithTransportCredentials(insecure.NewCredentials()))
		require.NoError(t, err)
		defer conn.Close()
		big := ptrace.NewTraces()
		big.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty().Attributes().
			PutStr("blob", strings.Repeat("x", (e.cfg.MaxRecvMiB<<20)+1024))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err = ptraceotlp.NewGRPCClient(conn).Export(ctx, ptraceotlp.NewExportRequestFromTraces(big))
		assert.Equal(t, codes.ResourceExhausted, status.Code(err), "oversize gRPC message: %v", err)
	})

	t.Run("malformed records are skipped and counted, the rest of the request is used", func(t *testing.T) {
		body, err := ptraceotlp.NewExportRequestFromTraces(malformedTraces()).MarshalProto()
		require.NoError(t, err)
		code, resp := postOTLP(t, p.HTTP, "/v1/traces", "application/x-protobuf", body)
		assert.Equal(t, http.StatusOK, code, "a request with some malformed spans is not a failed batch: %s", resp)
		jb, err := plogotlp.NewExportRequestFromLogs(malformedLogs()).MarshalJSON()
		require.NoError(t, err)
		code, resp = postOTLP(t, p.HTTP, "/v1/logs", "application/json", jb)
		assert.Equal(t, http.StatusOK, code, resp)

		ok := binarytest.Eventually(10*time.Second, func() bool {
			v, _ := e.scrape().Sum("otelcol_buildjob_records_skipped", nil)
			return v-skipped0 >= malformedRecords
		})
		samples := e.scrape()
		v, _ := samples.Sum("otelcol_buildjob_records_skipped", nil)
		assert.True(t, ok, "skipped records counted: %v, want %d", v-skipped0, malformedRecords)
		assert.Equal(t, 3.0, skippedBy(samples, "wrong_type"), "job id, stage and status of the wrong type")
		assert.Equal(t, 1.0, skippedBy(samples, "missing_attribute"), "a status record without a job id")
		assert.Equal(t, 1.0, skippedBy(samples, "negative_duration")+skippedBy(samples, "end_before_start"), "a span ending before it starts")
	})

	t.Run("NaN and Inf points are dropped and counted", func(t *testing.T) {
		body, err := pmetricotlp.NewExportRequestFromMetrics(badPoints()).MarshalProto()
		require.NoError(t, err)
		code, resp := postOTLP(t, p.HTTP, "/v1/metrics", "application/x-protobuf", body)
		assert.Equal(t, http.StatusOK, code, resp)
		dims := map[string]string{"service.name": badService, "i": "4"}
		require.True(t, binarytest.Eventually(15*time.Second, func() bool { return aggregate(e.cw.Datums(), "e2e.bad.gauge", dims).Datums > 0 }),
			"the good point of the batch did not land")
		assert.Equal(t, 42.0, aggregate(e.cw.Datums(), "e2e.bad.gauge", dims).Sum)
		assert.Equal(t, 1, aggregate(e.cw.Datums(), "e2e.bad.gauge", map[string]string{"service.name": badService}).Datums)
		samples := e.scrape()
		assert.Equal(t, 3.0, requireMetric(t, samples, "otelcol_exporter_cloudwatch_points_dropped", map[string]string{"reason": "nan_or_inf"}))
		assert.Equal(t, 1.0, requireMetric(t, samples, "otelcol_exporter_cloudwatch_points_dropped", map[string]string{"reason": "out_of_range"}))
	})

	t.Run("exponential buckets past the int32 index range leave the collector up", func(t *testing.T) {
		// The second point, at a lower scale, makes the cumulative
		// conversion merge the first one's buckets (before: a panic).
		now := time.Now()
		start := now.Add(-time.Minute)
		for i, md := range []pmetric.Metrics{extremeExponential(20, start, now.Add(-time.Second), 1, 1), extremeExponential(-10, start, now, 2, 2)} {
			body, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
			require.NoError(t, err)
			code, resp := postOTLP(t, p.HTTP, "/v1/metrics", "application/x-protobuf", body)
			require.Equal(t, http.StatusOK, code, "request %d: %s", i, resp)
		}
		dims := map[string]string{"service.name": badService}
		require.True(t, binarytest.Eventually(15*time.Second, func() bool { return aggregate(e.cw.Datums(), "e2e.bad.after", dims).Datums == 2 }),
			"the gauges beside the histograms did not land")
		require.True(t, e.col.healthy())
	})

	wg.Wait()
	require.NoError(t, goodErr)
	requireAllAcknowledged(t, good)
	require.True(t, e.col.healthy(), "the collector is not healthy after the bad input")
	e.waitJobs(30*time.Second, serviceDims(good), totalJobs(good.Generated))
	e.waitJobs(30*time.Second, map[string]string{"service.name": badService}, 1)
	time.Sleep(2 * e.cfg.FlushInterval)
	e.col.stop(30 * time.Second)

	datums := e.cw.Datums()
	checkDerived(t, datums, good.Generated, serviceDims(good), e.cfg.APIFromSpans)
	checkSDKMetrics(t, datums, good.SDKMetrics, serviceDims(good))
	// Of the malformed batch, exactly the good job counted, with its 10 s.
	bad := map[string]string{"service.name": badService}
	checkCounter(t, datums, mJobs, bad, 1, "Count")
	checkHistogram(t, datums, mJobDuration, withDims(bad, map[string]string{buildsim.AttrResult: buildsim.ResultSuccess}),
		buildsim.Stat{Count: 1, Sum: 10, Min: 10, Max: 10}, "Seconds")
	assert.Zero(t, e.cw.Stats().Rejected, "a bad point reached CloudWatch and got a whole request rejected")
}
