// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package pipelinehealthreceiver

import (
	"bytes"
	"context"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpubuild/otelcol-gpubuild/internal/confmap/pipelinetelemetry"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/promtext"
)

// Two reads of a pull endpoint in the collector's own format.
const (
	first = `# HELP otelcol_exporter_queue_size Current size of the retry queue (in batches). [Alpha]
# TYPE otelcol_exporter_queue_size gauge
otelcol_exporter_queue_size{data_type="metrics",exporter="cloudwatch"} 12
# HELP otelcol_receiver_refused_metric_points Number of metric points that could not be pushed into the pipeline. [Alpha]
# TYPE otelcol_receiver_refused_metric_points counter
otelcol_receiver_refused_metric_points{receiver="nvml",transport=""} 0
otelcol_receiver_refused_metric_points{receiver="otlp",transport="http"} 5
# HELP target_info Target metadata
# TYPE target_info gauge
target_info{service_instance_id="ca191330-d58d-43d7-aab6-956381dc7198",service_name="otelcol-gpubuild",service_version="0.1.0"} 1
`
	second = `# TYPE otelcol_exporter_queue_size gauge
otelcol_exporter_queue_size{data_type="metrics",exporter="cloudwatch"} 3
# TYPE otelcol_receiver_refused_metric_points counter
otelcol_receiver_refused_metric_points{receiver="nvml",transport=""} 0
otelcol_receiver_refused_metric_points{receiver="otlp",transport="http"} 8
# TYPE otelcol_exporter_send_failed_metric_points counter
otelcol_exporter_send_failed_metric_points{exporter="cloudwatch",otel_scope_name="x"} 40
# TYPE otelcol_process_runtime_heap_alloc_bytes histogram
otelcol_process_runtime_heap_alloc_bytes_bucket{le="+Inf"} 1
otelcol_process_runtime_heap_alloc_bytes_sum 1
otelcol_process_runtime_heap_alloc_bytes_count 1
`
)

func serve(t *testing.T, body *string, mu *sync.Mutex) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		_, _ = w.Write([]byte(*body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/metrics"
}

type point struct {
	value float64
	attrs map[string]any
}

func points(t *testing.T, md pmetric.Metrics) map[string][]point {
	t.Helper()
	out := map[string][]point{}
	require.Equal(t, 1, md.ResourceMetrics().Len())
	ms := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	for i := 0; i < ms.Len(); i++ {
		m := ms.At(i)
		var dps pmetric.NumberDataPointSlice
		switch m.Type() {
		case pmetric.MetricTypeSum:
			require.Equal(t, pmetric.AggregationTemporalityDelta, m.Sum().AggregationTemporality(), m.Name())
			require.True(t, m.Sum().IsMonotonic(), m.Name())
			dps = m.Sum().DataPoints()
		case pmetric.MetricTypeGauge:
			dps = m.Gauge().DataPoints()
		default:
			t.Fatalf("%s: %v", m.Name(), m.Type())
		}
		for j := 0; j < dps.Len(); j++ {
			out[m.Name()] = append(out[m.Name()], point{dps.At(j).DoubleValue(), dps.At(j).Attributes().AsRaw()})
		}
	}
	return out
}

func TestCountersAsDeltasGaugesAsTheyAre(t *testing.T) {
	var mu sync.Mutex
	body := first
	cfg := createDefaultConfig()
	cfg.URL = serve(t, &body, &mu)
	require.NoError(t, cfg.Validate())
	s := newEndpointScraper(cfg, "pipeline_health")

	md, err := s.scrape(context.Background())
	require.NoError(t, err)
	res := md.ResourceMetrics().At(0).Resource().Attributes().AsRaw()
	require.Equal(t, map[string]any{"service.name": "otelcol-gpubuild", "service.instance.id": "ca191330-d58d-43d7-aab6-956381dc7198", "service.version": "0.1.0"}, res)
	require.Equal(t, map[string][]point{
		"otelcol_exporter_queue_size": {{12, map[string]any{"data_type": "metrics", "exporter": "cloudwatch"}}},
		// Counted from zero: what the process counted before the first read.
		"otelcol_receiver_refused_metric_points": {
			{0, map[string]any{"receiver": "nvml"}}, // an empty label is no attribute
			{5, map[string]any{"receiver": "otlp", "transport": "http"}},
		},
	}, points(t, md))

	mu.Lock()
	body = second
	mu.Unlock()
	md, err = s.scrape(context.Background())
	require.NoError(t, err)
	require.Equal(t, 0, md.ResourceMetrics().At(0).Resource().Attributes().Len(), "no target_info, no resource")
	require.Equal(t, map[string][]point{
		"otelcol_exporter_queue_size": {{3, map[string]any{"data_type": "metrics", "exporter": "cloudwatch"}}},
		"otelcol_receiver_refused_metric_points": {
			{0, map[string]any{"receiver": "nvml"}},
			{3, map[string]any{"receiver": "otlp", "transport": "http"}},
		},
		// A series that appears counts its whole value: its first loss.
		"otelcol_exporter_send_failed_metric_points": {{40, map[string]any{"exporter": "cloudwatch"}}},
	}, points(t, md), "histograms are left out")

	// A counter that went down restarted: its value is the increment.
	mu.Lock()
	body = "# TYPE otelcol_receiver_refused_metric_points counter\notelcol_receiver_refused_metric_points{receiver=\"otlp\",transport=\"http\"} 2\n"
	mu.Unlock()
	md, err = s.scrape(context.Background())
	require.NoError(t, err)
	require.Equal(t, []point{{2, map[string]any{"receiver": "otlp", "transport": "http"}}}, points(t, md)["otelcol_receiver_refused_metric_points"])
}

func TestUnreachableEndpointIsAnError(t *testing.T) {
	cfg := createDefaultConfig()
	cfg.URL = "http://127.0.0.1:1/metrics"
	_, err := newEndpointScraper(cfg, "pipeline_health").scrape(context.Background())
	require.Error(t, err)
}

// A read as the Collector writes it, with points about the receiver itself.
const withSelf = `# TYPE otelcol_exporter_queue_size gauge
otelcol_exporter_queue_size{data_type="metrics",exporter="cloudwatch"} 7
# TYPE otelcol_exporter_sent_metric_points counter
otelcol_exporter_sent_metric_points{exporter="cloudwatch"} 12
# TYPE otelcol_receiver_refused_metric_points counter
otelcol_receiver_refused_metric_points{receiver="nvml",transport=""} 0
otelcol_receiver_refused_metric_points{receiver="pipeline_health",transport=""} 3
otelcol_receiver_refused_metric_points{receiver="pipeline_health/other",transport=""} 4
# TYPE otelcol_scraper_errored_metric_points counter
otelcol_scraper_errored_metric_points{receiver="pipeline_health",scraper="pipeline_health"} 2
# TYPE target_info gauge
target_info{service_name="otelcol-gpubuild"} 1
`

func TestKeepsTheNamedMetricsWithoutItsOwnPoints(t *testing.T) {
	var mu sync.Mutex
	body := withSelf
	cfg := createDefaultConfig()
	cfg.URL = serve(t, &body, &mu)
	cfg.MetricNames = []string{"otelcol_exporter_queue_size", "otelcol_receiver_refused_metric_points", "otelcol_scraper_errored_metric_points", "otelcol_fanout_points_dropped"}
	require.NoError(t, cfg.Validate())
	md, err := newEndpointScraper(cfg, "pipeline_health").scrape(context.Background())
	require.NoError(t, err)
	require.Equal(t, map[string][]point{
		"otelcol_exporter_queue_size": {{7, map[string]any{"data_type": "metrics", "exporter": "cloudwatch"}}},
		// Another receiver's points stay, even one of the same type.
		"otelcol_receiver_refused_metric_points": {
			{0, map[string]any{"receiver": "nvml"}},
			{4, map[string]any{"receiver": "pipeline_health/other"}},
		},
		// otelcol_scraper_errored_metric_points had only this receiver's
		// points: no metric; the sent points are not named.
	}, points(t, md))

	// Nothing left to send: no resource either.
	cfg.MetricNames = []string{"otelcol_scraper_errored_metric_points"}
	md, err = newEndpointScraper(cfg, "pipeline_health").scrape(context.Background())
	require.NoError(t, err)
	require.Equal(t, 0, md.ResourceMetrics().Len())

	// No names: every counter and gauge, still without its own points.
	cfg.MetricNames = nil
	md, err = newEndpointScraper(cfg, "pipeline_health").scrape(context.Background())
	require.NoError(t, err)
	got := points(t, md)
	require.Len(t, got, 3)
	require.Contains(t, got, "otelcol_exporter_sent_metric_points")
	require.NotContains(t, got, "otelcol_scraper_errored_metric_points")
}

func TestValidateNamesTheField(t *testing.T) {
	for _, ep := range []string{"", "127.0.0.1:8888", "ftp://h/metrics"} {
		cfg := createDefaultConfig()
		cfg.URL = ep
		require.ErrorContains(t, cfg.Validate(), "url", ep)
	}
	for _, names := range [][]string{
		{"otelcol_exporter_queue_size", ""},
		{"otelcol_exporter_queue_size", "otelcol exporter"},
		{"^(otelcol_.*)$"},
		{"otelcol_exporter_queue_size", "otelcol_exporter_queue_size"},
	} {
		cfg := createDefaultConfig()
		cfg.URL = "http://127.0.0.1:8888/metrics"
		cfg.MetricNames = names
		require.ErrorContains(t, cfg.Validate(), "metric_names[", names)
	}
}

// collectorRegistry is a registry with many families, as an endpoint with
// the runtime's and the process's collectors has, target_info, and two
// counters of the kind read.
func collectorRegistry(t testing.TB) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.MetricsAll)), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	info := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "target_info", Help: "Target metadata"}, []string{"service_name"})
	info.WithLabelValues("otelcol-gpubuild").Set(1)
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "otelcol_receiver_refused_metric_points", Help: "refused"}, []string{"receiver"})
	refused.WithLabelValues("otlp").Add(5)
	sent := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "otelcol_exporter_sent_metric_points", Help: "sent"}, []string{"exporter"})
	sent.WithLabelValues("cloudwatch").Add(12)
	reg.MustRegister(info, refused, sent)
	return reg
}

func TestAsksTheEndpointForTheKeptFamiliesOnly(t *testing.T) {
	var served bytes.Buffer
	var mu sync.Mutex
	handler := promhttp.HandlerFor(collectorRegistry(t), promhttp.HandlerOpts{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, r)
		mu.Lock()
		served.Reset()
		served.Write(rec.Body.Bytes())
		mu.Unlock()
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(srv.Close)

	cfg := createDefaultConfig()
	cfg.URL = srv.URL + "/metrics?extra=kept"
	cfg.MetricNames = []string{"otelcol_receiver_refused_metric_points"}
	require.NoError(t, cfg.Validate())
	md, err := newEndpointScraper(cfg, "pipeline_health").scrape(context.Background())
	require.NoError(t, err)
	require.Equal(t, map[string][]point{
		"otelcol_receiver_refused_metric_points": {{5, map[string]any{"receiver": "otlp"}}},
	}, points(t, md))
	require.Equal(t, map[string]any{"service.name": "otelcol-gpubuild"}, md.ResourceMetrics().At(0).Resource().Attributes().AsRaw())

	mu.Lock()
	families, err := promtext.Parse(bytes.NewReader(served.Bytes()))
	mu.Unlock()
	require.NoError(t, err, "the endpoint wrote plain text (no gzip over loopback)")
	require.Equal(t, []string{"otelcol_receiver_refused_metric_points", "target_info"}, families.Names(),
		"the endpoint wrote the named families and the resource, nothing else")

	// No names: every family is asked for (and every counter and gauge kept).
	cfg.MetricNames = nil
	md, err = newEndpointScraper(cfg, "pipeline_health").scrape(context.Background())
	require.NoError(t, err)
	require.Contains(t, points(t, md), "otelcol_exporter_sent_metric_points")
	require.Contains(t, points(t, md), "go_goroutines")
}

func TestReadURLKeepsTheQueryItHad(t *testing.T) {
	require.Equal(t, "http://127.0.0.1:8888/metrics", readURL("http://127.0.0.1:8888/metrics", nil))
	got, err := url.Parse(readURL("http://127.0.0.1:8888/metrics?x=1", []string{"a_b", "c"}))
	require.NoError(t, err)
	require.Equal(t, "/metrics", got.Path)
	require.Equal(t, url.Values{"x": {"1"}, "name[]": {"target_info", "a_b", "c"}}, got.Query())
}

// recordedEndpoint serves, through the handler the Collector's endpoint
// uses, what the sidecar's endpoint held after 200 builds at 50 a second
// (testdata/collector-endpoint.txt, read with curl).
func recordedEndpoint(tb testing.TB) *httptest.Server {
	f, err := os.Open(filepath.Join("testdata", "collector-endpoint.txt"))
	require.NoError(tb, err)
	defer func() { _ = f.Close() }()
	families, err := promtext.Parse(f)
	require.NoError(tb, err)
	gather := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		return slices.Collect(maps.Values(families)), nil
	})
	srv := httptest.NewServer(promhttp.HandlerFor(gather, promhttp.HandlerOpts{}))
	tb.Cleanup(srv.Close)
	return srv
}

// BenchmarkReadTheCollectorsEndpoint reads the sidecar's endpoint as
// recorded under load: every family with gzip (as a read did before it
// asked for the kept ones), the series the shipped configuration keeps
// (now), each on a new connection as shipped, and those on one connection
// kept from read to read (not shipped: it saves too little to show).
func BenchmarkReadTheCollectorsEndpoint(b *testing.B) {
	srv := recordedEndpoint(b)
	for _, bc := range []struct {
		name    string
		names   []string
		gzip    bool
		newConn bool
	}{
		{"every family, gzip, a connection each", nil, true, true},
		{"the kept families, a connection each", pipelinetelemetry.Series, false, true},
		{"the kept families, one kept connection", pipelinetelemetry.Series, false, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := createDefaultConfig()
			cfg.URL = srv.URL + "/metrics"
			cfg.MetricNames = bc.names
			s := newEndpointScraper(cfg, "pipeline_health")
			transport := s.client.Transport.(*http.Transport)
			transport.DisableCompression = !bc.gzip
			transport.DisableKeepAlives = bc.newConn
			b.Cleanup(transport.CloseIdleConnections)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.scrape(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
