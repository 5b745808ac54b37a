// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derive

import (
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpubuild/otelcol-gpubuild/internal/buildjob/derivestate"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otellog "go.opentelemetry.io/otel/log"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/embedded"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// t0 is the reference time of the tests; offsets from it are chosen so that
// every expected duration is exact in float64.
var t0 = time.Date(2026, time.March, 2, 10, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

// otlpSink is an OTLP/HTTP endpoint that decodes each request into pdata as
// the collector's OTLP receiver does, so tests see exactly what the real
// OTel SDK exporters put on the wire.
type otlpSink struct {
	srv      *httptest.Server
	mu       sync.Mutex
	received []any // ptrace.Traces, plog.Logs or pmetric.Metrics, in arrival order
}

func newOTLPSink(t *testing.T) *otlpSink {
	s := &otlpSink{}
	s.srv = httptest.NewServer(http.HandlerFunc(s.handle))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *otlpSink) handle(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = gz
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var resp []byte
	s.mu.Lock()
	defer s.mu.Unlock()
	switch r.URL.Path {
	case "/v1/traces":
		req := ptraceotlp.NewExportRequest()
		if err = req.UnmarshalProto(raw); err == nil {
			s.received = append(s.received, req.Traces())
			resp, err = ptraceotlp.NewExportResponse().MarshalProto()
		}
	case "/v1/logs":
		req := plogotlp.NewExportRequest()
		if err = req.UnmarshalProto(raw); err == nil {
			s.received = append(s.received, req.Logs())
			resp, err = plogotlp.NewExportResponse().MarshalProto()
		}
	case "/v1/metrics":
		req := pmetricotlp.NewExportRequest()
		if err = req.UnmarshalProto(raw); err == nil {
			s.received = append(s.received, req.Metrics())
			resp, err = pmetricotlp.NewExportResponse().MarshalProto()
		}
	default:
		http.NotFound(w, r)
		return
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(resp)
}

// take removes and returns the batches of type T received so far, in
// arrival order.
func take[T any](s *otlpSink) []T {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []T
	rest := s.received[:0]
	for _, b := range s.received {
		if v, ok := b.(T); ok {
			out = append(out, v)
		} else {
			rest = append(rest, b)
		}
	}
	s.received = rest
	return out
}

// takeTraces returns the span batches received since the last call, merged
// into one batch (the way a batch processor groups them).
func (s *otlpSink) takeTraces() ptrace.Traces {
	out := ptrace.NewTraces()
	for _, td := range take[ptrace.Traces](s) {
		td.ResourceSpans().MoveAndAppendTo(out.ResourceSpans())
	}
	return out
}

func (s *otlpSink) takeLogs() plog.Logs {
	out := plog.NewLogs()
	for _, ld := range take[plog.Logs](s) {
		ld.ResourceLogs().MoveAndAppendTo(out.ResourceLogs())
	}
	return out
}

func (s *otlpSink) takeMetrics() []pmetric.Metrics { return take[pmetric.Metrics](s) }

// takeAll returns every batch received so far, in arrival order.
func (s *otlpSink) takeAll() []any { return take[any](s) }

// testService plays the build service: the real OTel Go SDK with OTLP/HTTP
// exporters, exporting every span and log record as soon as it ends.
type testService struct {
	t      *testing.T
	sink   *otlpSink
	tp     *sdktrace.TracerProvider
	lp     *sdklog.LoggerProvider
	tracer trace.Tracer
	logger otellog.Logger
}

func newTestService(t *testing.T, sink *otlpSink, resAttrs ...attribute.KeyValue) *testService {
	ctx := context.Background()
	if len(resAttrs) == 0 {
		resAttrs = []attribute.KeyValue{attribute.String("service.name", "vector-index-build"), attribute.String("service.instance.id", "pod-a")}
	}
	res := resource.NewSchemaless(resAttrs...)
	texp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(sink.srv.URL+"/v1/traces"))
	require.NoError(t, err)
	lexp, err := otlploghttp.New(ctx, otlploghttp.WithEndpointURL(sink.srv.URL+"/v1/logs"))
	require.NoError(t, err)
	s := &testService{
		t:    t,
		sink: sink,
		tp:   sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSyncer(texp)),
		lp:   sdklog.NewLoggerProvider(sdklog.WithResource(res), sdklog.WithProcessor(sdklog.NewSimpleProcessor(lexp))),
	}
	s.tracer = s.tp.Tracer("build-service")
	s.logger = s.lp.Logger("build-service")
	t.Cleanup(func() {
		_ = s.tp.Shutdown(context.Background())
		_ = s.lp.Shutdown(context.Background())
	})
	return s
}

type spanOpts struct {
	kind   trace.SpanKind
	status codes.Code
	attrs  []attribute.KeyValue
}

// span records one span from start to end.
func (s *testService) span(name string, start, end time.Time, o spanOpts) {
	_, sp := s.tracer.Start(context.Background(), name, trace.WithTimestamp(start), trace.WithSpanKind(o.kind), trace.WithAttributes(o.attrs...))
	if o.status != codes.Unset {
		sp.SetStatus(o.status, "")
	}
	sp.End(trace.WithTimestamp(end))
}

func (s *testService) jobSpan(id string, start, end time.Time, status codes.Code, attrs ...attribute.KeyValue) {
	s.span("index_build", start, end, spanOpts{kind: trace.SpanKindInternal, status: status, attrs: append([]attribute.KeyValue{attribute.String("build.job.id", id)}, attrs...)})
}

func (s *testService) stageSpan(id, stage string, start, end time.Time, status codes.Code, attrs ...attribute.KeyValue) {
	s.span(stage, start, end, spanOpts{kind: trace.SpanKindInternal, status: status, attrs: append([]attribute.KeyValue{
		attribute.String("build.job.id", id), attribute.String("build.stage", stage),
	}, attrs...)})
}

func (s *testService) request(method, route string, code int, start, end time.Time, attrs ...attribute.KeyValue) {
	s.span(method+" "+route, start, end, spanOpts{kind: trace.SpanKindServer, attrs: append([]attribute.KeyValue{
		attribute.String("http.request.method", method), attribute.String("http.route", route),
		attribute.Int("http.response.status_code", code), attribute.String("url.scheme", "http"),
	}, attrs...)})
}

// status writes a job status log record stamped ts.
func (s *testService) status(id, status string, ts time.Time, attrs ...attribute.KeyValue) {
	var rec otellog.Record
	rec.SetTimestamp(ts)
	rec.SetSeverity(otellog.SeverityInfo)
	rec.SetBody(attribute.StringValue("job " + id + " is " + status))
	rec.AddAttributes(append([]attribute.KeyValue{attribute.String("build.job.id", id), attribute.String("build.job.status", status)}, attrs...)...)
	s.logger.Emit(context.Background(), rec)
}

func (s *testService) traces() ptrace.Traces { return s.sink.takeTraces() }
func (s *testService) logs() plog.Logs       { return s.sink.takeLogs() }

// point is one derived data point, flattened for assertions.
type point struct {
	metric      string
	unit        string
	kind        pmetric.MetricType
	temporality pmetric.AggregationTemporality
	monotonic   bool
	resource    map[string]string
	attrs       map[string]string
	start, ts   pcommon.Timestamp
	value       int64
	count       uint64
	sum         float64
	min, max    float64
	bounds      []float64
	buckets     []uint64
}

func points(md pmetric.Metrics) []point {
	var out []point
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		res := stringMap(rm.Resource().Attributes())
		for j := 0; j < rm.ScopeMetrics().Len(); j++ {
			ms := rm.ScopeMetrics().At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				base := point{metric: m.Name(), unit: m.Unit(), kind: m.Type(), resource: res}
				switch m.Type() {
				case pmetric.MetricTypeSum:
					base.temporality, base.monotonic = m.Sum().AggregationTemporality(), m.Sum().IsMonotonic()
					for l := 0; l < m.Sum().DataPoints().Len(); l++ {
						dp := m.Sum().DataPoints().At(l)
						p := base
						p.attrs, p.start, p.ts, p.value = stringMap(dp.Attributes()), dp.StartTimestamp(), dp.Timestamp(), dp.IntValue()
						out = append(out, p)
					}
				case pmetric.MetricTypeGauge:
					for l := 0; l < m.Gauge().DataPoints().Len(); l++ {
						dp := m.Gauge().DataPoints().At(l)
						p := base
						p.attrs, p.ts, p.value = stringMap(dp.Attributes()), dp.Timestamp(), dp.IntValue()
						out = append(out, p)
					}
				case pmetric.MetricTypeHistogram:
					base.temporality = m.Histogram().AggregationTemporality()
					for l := 0; l < m.Histogram().DataPoints().Len(); l++ {
						dp := m.Histogram().DataPoints().At(l)
						p := base
						p.attrs, p.start, p.ts = stringMap(dp.Attributes()), dp.StartTimestamp(), dp.Timestamp()
						p.count, p.sum, p.min, p.max = dp.Count(), dp.Sum(), dp.Min(), dp.Max()
						p.bounds, p.buckets = dp.ExplicitBounds().AsRaw(), dp.BucketCounts().AsRaw()
						out = append(out, p)
					}
				}
			}
		}
	}
	return out
}

func stringMap(m pcommon.Map) map[string]string {
	out := make(map[string]string, m.Len())
	for k, v := range m.All() {
		out[k] = v.AsString()
	}
	return out
}

// matching returns the points of metric whose attributes include want.
func matching(ps []point, metric string, want map[string]string) []point {
	var out []point
	for _, p := range ps {
		if p.metric != metric {
			continue
		}
		ok := true
		for k, v := range want {
			if p.attrs[k] != v {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, p)
		}
	}
	return out
}

// total sums the values (or histogram counts) of the matching points.
func total(ps []point, metric string, want map[string]string) int64 {
	var n int64
	for _, p := range matching(ps, metric, want) {
		if p.kind == pmetric.MetricTypeHistogram {
			n += int64(p.count)
		} else {
			n += p.value
		}
	}
	return n
}

// one returns the single point of metric with exactly the attributes want.
func one(t *testing.T, ps []point, metric string, want map[string]string) point {
	t.Helper()
	var found []point
	for _, p := range matching(ps, metric, want) {
		if len(p.attrs) == len(want) {
			found = append(found, p)
		}
	}
	require.Lenf(t, found, 1, "%s%v in:\n%s", metric, want, dump(ps))
	return found[0]
}

func dump(ps []point) string {
	lines := make([]string, 0, len(ps))
	for _, p := range ps {
		keys := make([]string, 0, len(p.attrs))
		for k, v := range p.attrs {
			keys = append(keys, k+"="+v)
		}
		sort.Strings(keys)
		v := p.value
		if p.kind == pmetric.MetricTypeHistogram {
			v = int64(p.count)
		}
		lines = append(lines, p.metric+"{"+strings.Join(keys, ",")+"} "+p.resource["service.instance.id"]+" = "+strconv.FormatInt(v, 10))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func attrs(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// testConfig is the default connector configuration with a flush interval
// the tests reason about.
func testConfig() *jobSettings {
	cfg := &jobSettings{OutputConfig: DefaultOutputConfig(), JobConfig: DefaultJobConfig(), State: derivestate.DefaultConfig()}
	cfg.MetricsFlushInterval = 10 * time.Second
	return cfg
}

// defaultOutput is the default output configuration.
func defaultOutput() *OutputConfig {
	cfg := DefaultOutputConfig()
	return &cfg
}

// testType is the component type the tests' connector factory creates.
var testType = component.MustNewType("buildjob")

// testTelemetry creates the counters a component's generated metadata
// defines, under the same names and of the same kinds, on set's meter
// provider.
func testTelemetry(set component.TelemetrySettings) Telemetry {
	meter := set.MeterProvider.Meter("buildjob-test")
	var mu sync.Mutex
	var regs []metric.Registration
	counter := func(name string) metric.Int64Counter {
		c, err := meter.Int64Counter(name)
		if err != nil {
			panic(err) // a fixed, valid name
		}
		return c
	}
	observable := func(name string) RegisterCallback {
		c, err := meter.Int64ObservableCounter(name)
		if err != nil {
			panic(err) // a fixed, valid name
		}
		return func(cb metric.Int64Callback) error {
			reg, err := meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
				return cb(ctx, int64Observer{inst: c, obs: o})
			}, c)
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			regs = append(regs, reg)
			return nil
		}
	}
	return Telemetry{
		FlushesFailed:       counter("otelcol_buildjob_flushes_failed"),
		PointsDropped:       counter("otelcol_buildjob_points_dropped"),
		RecordsSkipped:      observable("otelcol_buildjob_records_skipped"),
		RecordsDeduplicated: observable("otelcol_buildjob_records_deduplicated"),
		RunsEvicted:         observable("otelcol_buildjob_runs_evicted"),
		StateEntriesSkipped: observable("otelcol_buildjob_state_entries_skipped"),
		StateRunsEvicted:    observable("otelcol_buildjob_state_runs_evicted"),
		StateWriteFailures:  observable("otelcol_buildjob_state_write_failures"),
		Shutdown: func() {
			mu.Lock()
			defer mu.Unlock()
			for _, r := range regs {
				_ = r.Unregister()
			}
		},
	}
}

// int64Observer observes one observable counter through a callback's
// observer.
type int64Observer struct {
	embedded.Int64Observer
	inst metric.Int64Observable
	obs  metric.Observer
}

func (o int64Observer) Observe(v int64, opts ...metric.ObserveOption) {
	o.obs.ObserveInt64(o.inst, v, opts...)
}

// assertCounter compares the data points of a counter of testTelemetry.
func assertCounter(t *testing.T, tel *componenttest.Telemetry, name string, want []metricdata.DataPoint[int64], opts ...metricdatatest.Option) {
	t.Helper()
	got, err := tel.GetMetric(name)
	require.NoError(t, err)
	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name: name,
		Data: metricdata.Sum[int64]{Temporality: metricdata.CumulativeTemporality, IsMonotonic: true, DataPoints: want},
	}, got, opts...)
}

// flush emits what was derived, as when the next consumer accepts it.
func (d *deriver) flush(now time.Time, final bool) pmetric.Metrics {
	return d.takeFlush(now, final).md
}
