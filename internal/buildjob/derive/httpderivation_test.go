// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derive

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/gpubuild/otelcol-gpubuild/internal/buildjob/derivestate"
	"github.com/gpubuild/otelcol-gpubuild/internal/cumulative"
)

// sdkMeter is the service's OTel metrics SDK exporting OTLP/HTTP on demand,
// as its periodic reader would every interval.
type sdkMeter struct {
	t      *testing.T
	mp     *sdkmetric.MeterProvider
	reader *sdkmetric.ManualReader
	exp    sdkmetric.Exporter
	meter  metric.Meter
}

func newSDKMeter(t *testing.T, sink *otlpSink, delta bool, resAttrs ...attribute.KeyValue) *sdkMeter {
	ctx := context.Background()
	opts := []otlpmetrichttp.Option{otlpmetrichttp.WithEndpointURL(sink.srv.URL + "/v1/metrics")}
	if delta {
		opts = append(opts, otlpmetrichttp.WithTemporalitySelector(func(sdkmetric.InstrumentKind) metricdata.Temporality { return metricdata.DeltaTemporality }))
	}
	exp, err := otlpmetrichttp.New(ctx, opts...)
	require.NoError(t, err)
	if len(resAttrs) == 0 {
		resAttrs = []attribute.KeyValue{attribute.String("service.name", "vector-index-build")}
	}
	reader := sdkmetric.NewManualReader(sdkmetric.WithTemporalitySelector(exp.Temporality), sdkmetric.WithAggregationSelector(exp.Aggregation))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithResource(resource.NewSchemaless(resAttrs...)), sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return &sdkMeter{t: t, mp: mp, reader: reader, exp: exp, meter: mp.Meter("opentelemetry-instrumentation-fastapi")}
}

func (m *sdkMeter) export() {
	var rm metricdata.ResourceMetrics
	require.NoError(m.t, m.reader.Collect(context.Background(), &rm))
	require.NoError(m.t, m.exp.Export(context.Background(), &rm))
}

// serverDuration is http.server.request.duration as the HTTP semantic
// conventions (and the Python FastAPI instrumentation) define it.
func (m *sdkMeter) serverDuration() metric.Float64Histogram {
	h, err := m.meter.Float64Histogram("http.server.request.duration", metric.WithUnit("s"), metric.WithDescription("Duration of HTTP server requests."))
	require.NoError(m.t, err)
	return h
}

func request(h metric.Float64Histogram, method, route string, code int, seconds float64) {
	h.Record(context.Background(), seconds, metric.WithAttributes(
		attribute.String("http.request.method", method), attribute.String("http.route", route),
		attribute.Int("http.response.status_code", code), attribute.String("url.scheme", "http"),
	))
}

func consumeAll(d *deriver, batches []pmetric.Metrics, now time.Time) {
	for _, md := range batches {
		d.consumeHTTPMetrics(md, now)
	}
}

func TestProcessorCountsRequestsFromCumulativeHistograms(t *testing.T) {
	sink := newOTLPSink(t)
	d := newProcessorDeriver(defaultOutput(), DefaultCumulativeConfig(), time.Now(), nil)

	svc := newSDKMeter(t, sink, false, attribute.String("service.name", "vector-index-build"), attribute.String("service.instance.id", "pod-a"))
	h := svc.serverDuration()
	request(h, "POST", "/_build", 202, 0.2)
	request(h, "POST", "/_build", 202, 0.3)
	for range 3 {
		request(h, "GET", "/_status/{job_id}", 200, 0.01)
	}
	request(h, "GET", "/_status/{job_id}", 404, 0.01)
	request(h, "GET", "/_status/{job_id}", 500, 0.01)
	svc.export()
	consumeAll(d, sink.takeMetrics(), time.Now())

	ps := points(d.flush(time.Now(), false))
	p := one(t, ps, metricAPIRequests, attrs("http.route", "/_build", "http.request.method", "POST", "http.response.status_class", "2xx"))
	assert.Equal(t, int64(2), p.value)
	assert.Equal(t, "{request}", p.unit)
	assert.Equal(t, pmetric.AggregationTemporalityDelta, p.temporality)
	assert.Equal(t, "pod-a", p.resource["service.instance.id"])
	assert.Equal(t, int64(3), one(t, ps, metricAPIRequests, attrs("http.route", "/_status/{job_id}", "http.request.method", "GET", "http.response.status_class", "2xx")).value)
	assert.Equal(t, int64(1), one(t, ps, metricAPIRequests, attrs("http.route", "/_status/{job_id}", "http.request.method", "GET", "http.response.status_class", "4xx")).value)
	assert.Equal(t, int64(1), one(t, ps, metricAPIRequests, attrs("http.route", "/_status/{job_id}", "http.request.method", "GET", "http.response.status_class", "5xx")).value)
	assert.Empty(t, matching(ps, metricAPIRequestDuration, nil), "latency stays in the service's own histogram")

	// The next export repeats every cumulative series; only the increase counts.
	request(h, "POST", "/_build", 202, 0.2)
	svc.export()
	svc.export() // and an export with nothing new
	consumeAll(d, sink.takeMetrics(), time.Now())
	ps = points(d.flush(time.Now(), false))
	assert.Equal(t, int64(1), total(ps, metricAPIRequests, nil), dump(ps))

	// The service restarts: a new SDK, new start times, counts from zero.
	require.NoError(t, svc.mp.Shutdown(context.Background()))
	restarted := newSDKMeter(t, sink, false, attribute.String("service.name", "vector-index-build"), attribute.String("service.instance.id", "pod-a"))
	h2 := restarted.serverDuration()
	request(h2, "GET", "/_status/{job_id}", 200, 0.01)
	request(h2, "GET", "/_status/{job_id}", 200, 0.01)
	restarted.export()
	consumeAll(d, sink.takeMetrics(), time.Now())
	ps = points(d.flush(time.Now(), false))
	assert.Equal(t, int64(2), one(t, ps, metricAPIRequests, attrs("http.route", "/_status/{job_id}", "http.request.method", "GET", "http.response.status_class", "2xx")).value)
	assert.Equal(t, int64(2), total(ps, metricAPIRequests, nil))
}

// A collector started after the service served requests counts them: the
// first point of a series counts from its start time.
func TestProcessorCountsRequestsServedBeforeItStarted(t *testing.T) {
	sink := newOTLPSink(t)
	svc := newSDKMeter(t, sink, false)
	h := svc.serverDuration()
	request(h, "POST", "/_build", 202, 0.2) // before the collector started
	request(h, "POST", "/_build", 202, 0.2)
	time.Sleep(time.Millisecond) // the start of the SDK's series is before the processor's
	d := newProcessorDeriver(defaultOutput(), DefaultCumulativeConfig(), time.Now(), nil)

	svc.export()
	consumeAll(d, sink.takeMetrics(), time.Now())
	assert.Equal(t, int64(2), total(points(d.flush(time.Now(), false)), metricAPIRequests, nil))

	request(h, "POST", "/_build", 202, 0.2)
	svc.export()
	consumeAll(d, sink.takeMetrics(), time.Now())
	assert.Equal(t, int64(1), total(points(d.flush(time.Now(), false)), metricAPIRequests, nil))
}

// A series that started longer than cumulative.max_age ago is a baseline:
// a sidecar added to a long-running service does not report its whole
// history at once.
func TestProcessorBaselinesSeriesOlderThanMaxAge(t *testing.T) {
	cum := DefaultCumulativeConfig()
	cum.MaxAge = time.Hour
	d := newProcessorDeriver(defaultOutput(), cum, time.Now(), nil)
	now := time.Now()
	md := httpHistogram(now.Add(-2*time.Hour), now, 500)
	consumeAll(d, []pmetric.Metrics{md}, now)
	assert.Empty(t, points(d.flush(now, false)))
	consumeAll(d, []pmetric.Metrics{httpHistogram(now.Add(-2*time.Hour), now.Add(time.Minute), 503)}, now.Add(time.Minute))
	assert.Equal(t, int64(3), total(points(d.flush(now.Add(time.Minute), false)), metricAPIRequests, nil))
}

// A point stamped hours ahead is refused for its series and counted; the
// series goes on with its next good point.
func TestProcessorRefusesPointsFromTheFuture(t *testing.T) {
	now := time.Now()
	d := newProcessorDeriver(defaultOutput(), DefaultCumulativeConfig(), now, nil)
	start := now.Add(-time.Minute)
	consumeAll(d, []pmetric.Metrics{httpHistogram(start, now, 10)}, now)
	consumeAll(d, []pmetric.Metrics{httpHistogram(start, now.Add(3*time.Hour), 1000)}, now)
	consumeAll(d, []pmetric.Metrics{httpHistogram(start, now.Add(time.Minute), 12)}, now.Add(time.Minute))
	assert.Equal(t, int64(12), total(points(d.flush(now.Add(time.Minute), false)), metricAPIRequests, nil))
	assert.Equal(t, int64(1), d.peekStats().cumulativeRefused[cumulative.ReasonFuture])
}

// httpHistogram is one cumulative http.server.request.duration point of
// POST /_build 202 with count requests.
func httpHistogram(start, ts time.Time, count uint64) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "vector-index-build")
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("http.server.request.duration")
	m.SetUnit("s")
	h := m.SetEmptyHistogram()
	h.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	dp := h.DataPoints().AppendEmpty()
	dp.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
	dp.SetTimestamp(pcommon.NewTimestampFromTime(ts))
	dp.SetCount(count)
	dp.Attributes().PutStr("http.request.method", "POST")
	dp.Attributes().PutStr("http.route", "/_build")
	dp.Attributes().PutInt("http.response.status_code", 202)
	return md
}

func TestProcessorDeltaHistogramsAndOldConventions(t *testing.T) {
	sink := newOTLPSink(t)
	d := newProcessorDeriver(defaultOutput(), DefaultCumulativeConfig(), time.Now(), nil)
	svc := newSDKMeter(t, sink, true)
	h := svc.serverDuration()
	request(h, "GET", "/_status/{job_id}", 200, 0.01)
	request(h, "GET", "/_status/{job_id}", 200, 0.01)
	// http.server.duration (milliseconds) with the older attribute names.
	old, err := svc.meter.Float64Histogram("http.server.duration", metric.WithUnit("ms"))
	require.NoError(t, err)
	old.Record(context.Background(), 12, metric.WithAttributes(attribute.String("http.method", "POST"), attribute.String("http.route", "/_build"), attribute.Int("http.status_code", 503)))
	// Other metrics are not requests.
	c, err := svc.meter.Int64Counter("build.vectors")
	require.NoError(t, err)
	c.Add(context.Background(), 1000)
	svc.export()
	consumeAll(d, sink.takeMetrics(), time.Now())

	request(h, "GET", "/_status/{job_id}", 200, 0.01)
	svc.export()
	consumeAll(d, sink.takeMetrics(), time.Now())

	ps := points(d.flush(time.Now(), false))
	assert.Equal(t, int64(3), one(t, ps, metricAPIRequests, attrs("http.route", "/_status/{job_id}", "http.request.method", "GET", "http.response.status_class", "2xx")).value)
	assert.Equal(t, int64(1), one(t, ps, metricAPIRequests, attrs("http.route", "/_build", "http.request.method", "POST", "http.response.status_class", "5xx")).value)
	assert.Equal(t, int64(4), total(ps, metricAPIRequests, nil))
}

func TestProcessorCumulativeOutput(t *testing.T) {
	sink := newOTLPSink(t)
	cfg := defaultOutput()
	cfg.Temporality = TemporalityCumulative
	cfg.Dimensions = []string{"deployment.environment.name"}
	start := time.Now()
	d := newProcessorDeriver(cfg, DefaultCumulativeConfig(), start, nil)
	svc := newSDKMeter(t, sink, false, attribute.String("service.name", "vector-index-build"), attribute.String("deployment.environment.name", "prod"))
	h := svc.serverDuration()
	request(h, "POST", "/_build", 202, 0.2)
	svc.export()
	consumeAll(d, sink.takeMetrics(), time.Now())
	d.flush(time.Now(), false)
	request(h, "POST", "/_build", 202, 0.2)
	svc.export()
	consumeAll(d, sink.takeMetrics(), time.Now())
	ps := points(d.flush(time.Now(), false))
	p := one(t, ps, metricAPIRequests, attrs("http.route", "/_build", "http.request.method", "POST", "http.response.status_class", "2xx", "deployment.environment.name", "prod"))
	assert.Equal(t, int64(2), p.value)
	assert.Equal(t, pmetric.AggregationTemporalityCumulative, p.temporality)
	assert.Equal(t, ts(start), p.start)
}

func TestProcessorPassesMetricsThroughAndFlushesOnShutdown(t *testing.T) {
	ctx := context.Background()
	next := new(consumertest.MetricsSink)
	set := componenttest.NewNopTelemetrySettings()
	p := newTestProcessor(set, HTTPSpec{Output: *defaultOutput(), Telemetry: testTelemetry(set)}, derivestate.Config{}, next)
	require.NoError(t, p.Start(ctx, componenttest.NewNopHost()))

	sink := newOTLPSink(t)
	svc := newSDKMeter(t, sink, false)
	h := svc.serverDuration()
	request(h, "POST", "/_build", 202, 0.2)
	request(h, "POST", "/_build", 500, 0.2)
	svc.export()
	batches := sink.takeMetrics()
	require.Len(t, batches, 1)
	in := batches[0]
	want := pmetric.NewMetrics()
	in.CopyTo(want)
	out, err := p.ProcessMetrics(ctx, in)
	require.NoError(t, err)
	assert.Equal(t, want, out, "input passes through unchanged")
	assert.Empty(t, next.AllMetrics(), "nothing derived is emitted before a flush")

	require.NoError(t, p.Shutdown(ctx))
	require.Len(t, next.AllMetrics(), 1, "the derived counts are emitted at shutdown")
	ps := points(next.AllMetrics()[0])
	assert.Equal(t, int64(1), one(t, ps, metricAPIRequests, attrs("http.route", "/_build", "http.request.method", "POST", "http.response.status_class", "2xx")).value)
	assert.Equal(t, int64(1), one(t, ps, metricAPIRequests, attrs("http.route", "/_build", "http.request.method", "POST", "http.response.status_class", "5xx")).value)
}
