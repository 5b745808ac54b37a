// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package pipelinehealthreceiver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"
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
