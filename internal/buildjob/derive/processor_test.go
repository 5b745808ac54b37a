package derive

import (
	"context"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
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
	d := newProcessorDeriver(defaultOutput(), time.Now())

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

func TestProcessorBaselinesSeriesOlderThanItself(t *testing.T) {
	sink := newOTLPSink(t)
	svc := newSDKMeter(t, sink, false)
	h := svc.serverDuration()
	request(h, "POST", "/_build", 202, 0.2) // before the collector started
	time.Sleep(time.Millisecond)
	d := newProcessorDeriver(defaultOutput(), time.Now())

	svc.export()
	consumeAll(d, sink.takeMetrics(), time.Now())
	assert.Empty(t, points(d.flush(time.Now(), false)), "what happened before the collector started is unknown")

	request(h, "POST", "/_build", 202, 0.2)
	svc.export()
	consumeAll(d, sink.takeMetrics(), time.Now())
	ps := points(d.flush(time.Now(), false))
	assert.Equal(t, int64(1), total(ps, metricAPIRequests, nil))
}

func TestProcessorDeltaHistogramsAndOldConventions(t *testing.T) {
	sink := newOTLPSink(t)
	d := newProcessorDeriver(defaultOutput(), time.Now())
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
	d := newProcessorDeriver(cfg, start)
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
	p := NewHTTPProcessor(set, ProcessorSpec{ID: component.NewID(testType), Output: *defaultOutput(), ConnectorType: testType, Telemetry: testTelemetry(set)}, next)
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

func TestCumulativeCountsRules(t *testing.T) {
	// The rules of cumulativeCounts.delta, one transition each.
	const startA, startB = 1000, 2000
	c := newCumulativeCounts(testSeed, startA)
	res, attrs := testMap("service.name", "svc"), testMap("http.route", "/x")
	now := time.Now()
	assert.Equal(t, uint64(5), c.delta(res, "m", attrs, startA, 5, now), "new series since the component started")
	assert.Equal(t, uint64(3), c.delta(res, "m", attrs, startA, 8, now), "increase")
	assert.Equal(t, uint64(0), c.delta(res, "m", attrs, startA, 8, now), "repeat")
	assert.Equal(t, uint64(0), c.delta(res, "m", attrs, startA, 6, now), "late, out of order")
	assert.Equal(t, uint64(2), c.delta(res, "m", attrs, startB, 2, now), "restart: new start time")
	assert.Equal(t, uint64(0), c.delta(res, "m", attrs, startA, 9, now), "a point of the old process arriving late")
	assert.Equal(t, uint64(0), c.delta(res, "m", testMap("http.route", "/y"), startA-1, 7, now), "started before the component: baseline")

	// Forgotten after an hour idle; seen again, it is a baseline, not new.
	c.forgetIdle(now.Add(cumulativeIdleTTL))
	assert.Empty(t, c.entries)
	assert.Equal(t, uint64(0), c.delta(res, "m", attrs, startB, 4, now.Add(2*cumulativeIdleTTL)))
	assert.Equal(t, uint64(1), c.delta(res, "m", attrs, startB, 5, now.Add(2*cumulativeIdleTTL)))
}
