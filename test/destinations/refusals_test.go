// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package destinations

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
)

// serviceSDK is an OTel SDK meter provider whose collections the test
// exports itself, late or out of order, as a service does when an export
// waits behind a slow network or a busy sidecar.
type serviceSDK struct {
	reader   *sdkmetric.ManualReader
	provider *sdkmetric.MeterProvider
	exporter *otlpmetrichttp.Exporter
}

func newServiceSDK(t testing.TB, p collectorPorts, res *resource.Resource) *serviceSDK {
	t.Helper()
	exp, err := otlpmetrichttp.New(context.Background(),
		otlpmetrichttp.WithEndpoint(fmt.Sprintf("127.0.0.1:%d", p.HTTP)), otlpmetrichttp.WithInsecure())
	require.NoError(t, err)
	reader := sdkmetric.NewManualReader()
	s := &serviceSDK{reader: reader, exporter: exp,
		provider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithResource(res))}
	t.Cleanup(func() { _ = s.provider.Shutdown(context.Background()) })
	return s
}

func (s *serviceSDK) collect(t testing.TB) *metricdata.ResourceMetrics {
	t.Helper()
	rm := &metricdata.ResourceMetrics{}
	require.NoError(t, s.reader.Collect(context.Background(), rm))
	return rm
}

func (s *serviceSDK) export(t testing.TB, rm *metricdata.ResourceMetrics) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, s.exporter.Export(ctx, rm))
}

// sendFailedPoints reads the collector's own counter of metric points an
// exporter failed to send (and dropped) from its telemetry endpoint.
func sendFailedPoints(t testing.TB, p collectorPorts, exporter string) float64 {
	return exporterPoints(t, p, "otelcol_exporter_send_failed_metric_points", exporter)
}

// exporterPoints sums the collector's own counter metric for one exporter,
// read from its telemetry endpoint.
func exporterPoints(t testing.TB, p collectorPorts, metric, exporter string) float64 {
	return telemetryCounter(t, p, metric, "exporter", exporter)
}

// The service's SDK metrics and the build metrics the sidecar derives from
// the service's spans share one resource, so one Prometheus identity (job,
// instance and the other resource attributes). An SDK export collected
// before a derived flush but delivered after it (the export waited for the
// sidecar, as under CPU contention) must still be stored: its points are
// the newest of their own series. A strict store (no out-of-order window)
// refused such an export while the exporter also wrote the resource's
// target_info series, stamped with the newest point of each batch.
func TestRemoteWriteLateExportOfTheServiceResource(t *testing.T) {
	s := startStores(t)
	p := newCollectorPorts(t)
	startCollector(t, p, s.env(p, t.TempDir()))

	cfg := simConfig(p, "vector-index-build", 41)
	sdk := newServiceSDK(t, p, resource.NewWithAttributes("",
		attribute.String("service.name", cfg.ServiceName),
		attribute.String("service.instance.id", cfg.InstanceID),
		attribute.String("service.version", "1.0.0"),
	))
	counter, err := sdk.provider.Meter("late").Int64Counter("buildsvc.late.exports")
	require.NoError(t, err)
	counter.Add(context.Background(), 3)
	late := sdk.collect(t)

	// The service builds; the sidecar derives and flushes its metrics, all
	// stamped after the collection above, and every store holds them.
	want := truthTotals(runSim(t, cfg))
	awaitExact(t, s, want, destinationNames, 2*time.Minute)

	sdk.export(t, late)
	got := map[string]float64{}
	arrived := binarytest.Eventually(2*time.Minute, func() bool {
		got["otlp"] = s.otlp.cumulativeTotal("buildsvc.late.exports", nil)
		got["cloudwatch-otlp"] = s.cwOTLP.cumulativeTotal("buildsvc.late.exports", nil)
		got["prometheus-remote-write"], _ = s.remote.Single(t, `buildsvc_late_exports_total`)
		return got["otlp"] == 3 && got["cloudwatch-otlp"] == 3 && got["prometheus-remote-write"] == 3
	})
	require.True(t, arrived, "the late export in every OTLP and remote-write store: %v (remote write refusals: %d, last %q)",
		got, s.remoteIn.refused4x.Load(), s.remoteIn.last4xx())
	require.Zero(t, s.remoteIn.refused4x.Load(), "remote write requests refused by the store: last %q", s.remoteIn.last4xx())
}

// A request the remote-write store refuses for good (HTTP 400: here a
// sample older than the store's head block, out of bounds) is dropped once, logged and counted; it is not sent again and
// does not hold up later requests. Only that request is lost, and only in
// that store: the other destinations keep it, and every later workload is
// exact everywhere.
func TestRemoteWriteRefusalLosesOnlyThatRequest(t *testing.T) {
	s := startStores(t)
	p := newCollectorPorts(t)
	c := startCollector(t, p, s.env(p, t.TempDir()))
	sendRefusedRemoteWrite(t, s, p)

	// Later workloads reach every store exactly, remote write included.
	want := truthTotals(runSim(t, simConfig(p, "vector-index-build", 43)))
	awaitExact(t, s, want, destinationNames, 2*time.Minute)

	require.EqualValues(t, 1, s.remoteIn.refused4x.Load(), "the refused request was sent once, not again")
	v, _ := s.remote.Single(t, `buildsvc_late_exports_total`)
	require.Equal(t, 12.0, v, "remote write keeps the newest value")
	_, stored := s.remote.Single(t, `buildsvc_early_exports_total`)
	require.False(t, stored, "the other series of the refused request is lost in remote write")
	for name, sink := range map[string]*otlpSink{"otlp": s.otlp, "cloudwatch-otlp": s.cwOTLP} {
		require.Equal(t, 12.0, sink.cumulativeTotal("buildsvc.late.exports", nil), name)
		require.Equal(t, 2.0, sink.cumulativeTotal("buildsvc.early.exports", nil), name+" keeps what remote write lost")
	}
	// Dropped with a log line naming the store's answer, and counted: the
	// one point of the refused request (its older point of the shared
	// series never reached the store).
	out := c.Output.String()
	require.Contains(t, out, "out of bounds")
	require.Contains(t, out, "Exporting failed. Dropping data.")
	require.True(t, binarytest.Eventually(time.Minute, func() bool {
		return sendFailedPoints(t, p, "prometheusremotewrite/destination") == 1
	}), "otelcol_exporter_send_failed_metric_points for remote write: %v", sendFailedPoints(t, p, "prometheusremotewrite/destination"))
	require.Equal(t, 1, strings.Count(out, "Exporting failed. Dropping data."), "one request dropped")
}

// The limit of GPUBUILD_PROMETHEUS_REMOTE_WRITE_WAL=true, kept as a test so
// that a contrib release that fixes it shows: the write-ahead log sends a
// refused request again and again instead of dropping it.
func TestRemoteWriteWALResendsARefusedRequest(t *testing.T) {
	s := startStores(t)
	p := newCollectorPorts(t)
	startCollector(t, p, append(s.env(p, t.TempDir()), "GPUBUILD_PROMETHEUS_REMOTE_WRITE_WAL=true"))
	sendRefusedRemoteWrite(t, s, p)
	require.True(t, binarytest.Eventually(2*time.Minute, func() bool { return s.remoteIn.refused4x.Load() >= 5 }),
		"the log re-sends the refused request: %d refusals", s.remoteIn.refused4x.Load())
}

// sendRefusedRemoteWrite exports two collections of one service's SDK,
// the newer first. The older one's point of the shared series is removed
// by the sidecar (older than its series' last: out_of_order); its series
// of its own is stamped two hours back, which the remote-write store
// refuses for good (out of bounds) with the request. It returns once the
// store has refused it.
func sendRefusedRemoteWrite(t *testing.T, s *stores, p collectorPorts) {
	t.Helper()
	sdk := newServiceSDK(t, p, resource.NewWithAttributes("",
		attribute.String("service.name", "late-exporter"),
		attribute.String("service.instance.id", "late-exporter-0"),
	))
	counter, err := sdk.provider.Meter("late").Int64Counter("buildsvc.late.exports")
	require.NoError(t, err)
	ctx := context.Background()
	counter.Add(ctx, 5)
	older := sdk.collect(t)
	// A second series only in the older collection, two hours old: older
	// than the store's head, so the store refuses the request it is in.
	olderTS := older.ScopeMetrics[0].Metrics[0].Data.(metricdata.Sum[int64]).DataPoints[0].Time
	earlyTS := olderTS.Add(-2 * time.Hour)
	older.ScopeMetrics[0].Metrics = append(older.ScopeMetrics[0].Metrics, metricdata.Metrics{
		Name: "buildsvc.early.exports",
		Data: metricdata.Sum[int64]{
			Temporality: metricdata.CumulativeTemporality, IsMonotonic: true,
			DataPoints: []metricdata.DataPoint[int64]{{StartTime: earlyTS.Add(-time.Second), Time: earlyTS, Value: 2}},
		},
	})
	// Prometheus keeps milliseconds: the newer collection must be a later
	// millisecond for the store to see it as newer (the same one, with
	// another value, is refused as a duplicate instead).
	require.True(t, binarytest.Eventually(time.Second, func() bool { return time.Since(olderTS) > 2*time.Millisecond }))
	counter.Add(ctx, 7)
	newer := sdk.collect(t)

	sdk.export(t, newer)
	require.True(t, binarytest.Eventually(2*time.Minute, func() bool {
		v, ok := s.remote.Single(t, `buildsvc_late_exports_total`)
		return ok && v == 12
	}), "the newer collection in remote write")
	sdk.export(t, older)
	require.True(t, binarytest.Eventually(2*time.Minute, func() bool { return s.remoteIn.refused4x.Load() > 0 }),
		"the store refuses the older collection")
	require.Contains(t, s.remoteIn.last4xx(), "out of bounds")
}

// OTLP stores refuse in two ways. A partial success (200 with
// rejected_data_points) keeps the rest of the request: the exporter logs it
// and sends nothing again. A 400 refuses the whole request: the exporter
// drops it (logged, counted) and sends nothing again. Either way later
// requests and the other stores are unaffected.
func TestOTLPRefusalsLoseOnlyTheirPart(t *testing.T) {
	s := startStores(t)
	s.otlp.refuse(sinkRefusal{metric: "buildsvc.early.exports"})
	s.cwOTLP.refuse(sinkRefusal{metric: "buildsvc.early.exports", wholeAs400: true})
	p := newCollectorPorts(t)
	c := startCollector(t, p, s.env(p, t.TempDir()))

	sdk := newServiceSDK(t, p, resource.NewWithAttributes("",
		attribute.String("service.name", "refused-exporter"),
		attribute.String("service.instance.id", "refused-exporter-0"),
	))
	ctx := context.Background()
	meter := sdk.provider.Meter("refused")
	early, err := meter.Int64Counter("buildsvc.early.exports")
	require.NoError(t, err)
	late, err := meter.Int64Counter("buildsvc.late.exports")
	require.NoError(t, err)
	early.Add(ctx, 2)
	late.Add(ctx, 5)
	sdk.export(t, sdk.collect(t))

	require.True(t, binarytest.Eventually(2*time.Minute, func() bool {
		return s.otlp.rejectedPoints.Load() > 0 && s.cwOTLP.refused4x.Load() > 0
	}), "both OTLP stores refused the metric")
	want := truthTotals(runSim(t, simConfig(p, "vector-index-build", 47)))
	awaitExact(t, s, want, destinationNames, 2*time.Minute)

	// otlp: only the refused metric's point is lost.
	require.EqualValues(t, 1, s.otlp.rejectedPoints.Load())
	require.Equal(t, 5.0, s.otlp.cumulativeTotal("buildsvc.late.exports", nil))
	require.Zero(t, s.otlp.cumulativeTotal("buildsvc.early.exports", nil))
	// cloudwatch-otlp: the whole request is lost, once.
	require.EqualValues(t, 1, s.cwOTLP.refused4x.Load(), "the refused request was sent once")
	require.Zero(t, s.cwOTLP.cumulativeTotal("buildsvc.late.exports", nil))
	require.Equal(t, 2, s.cwOTLP.refusedPointsOf("refused-exporter"), "the service's points in the refused request")
	// The other stores have both.
	for name, prom := range map[string]*prometheusServer{"prometheus": s.scrape, "prometheus-remote-write": s.remote} {
		require.True(t, binarytest.Eventually(time.Minute, func() bool {
			e, okE := prom.Single(t, `buildsvc_early_exports_total{job="refused-exporter"}`)
			l, okL := prom.Single(t, `buildsvc_late_exports_total{job="refused-exporter"}`)
			return okE && okL && e == 2 && l == 5
		}), name)
	}

	out := c.Output.String()
	require.Contains(t, out, "Partial success response")
	require.Contains(t, out, `"dropped_data_points": 1`)
	require.Contains(t, out, "Exporting failed. Dropping data.")
	require.True(t, binarytest.Eventually(time.Minute, func() bool {
		return sendFailedPoints(t, p, "otlp_http/cloudwatch_otlp") == float64(s.cwOTLP.refusedPoints.Load())
	}), "otelcol_exporter_send_failed_metric_points for cloudwatch-otlp: %v, the store refused %d (the service's 2 and what shared their request)",
		sendFailedPoints(t, p, "otlp_http/cloudwatch_otlp"), s.cwOTLP.refusedPoints.Load())
	require.Zero(t, sendFailedPoints(t, p, "otlp_http/destination"), "a partial success is not a failed send")
}

// Remote write is down while the collector is stopped (SIGTERM) and
// started again on the same queue directory, with workloads before and
// after the restart: the persistent queue keeps what the first process
// accepted, and once the store answers it holds every request of both
// processes, each once. The cumulative conversion is in memory, so the
// derived series start again from zero after the restart (a counter reset
// in Prometheus); the totals are read from the stored samples the way
// Prometheus' increase() reads them, without its extrapolation.
func TestRemoteWriteOutageAcrossARestartLosesNothing(t *testing.T) {
	s := startStores(t)
	s.remoteIn.down.Store(true)
	p := newCollectorPorts(t)
	queueDir := t.TempDir()
	env := append(s.env(p, queueDir), "GPUBUILD_DESTINATIONS=prometheus-remote-write")

	c := startCollector(t, p, env)
	first := truthTotals(runSim(t, simConfig(p, "vector-index-build", 51)))
	require.True(t, binarytest.Eventually(time.Minute, func() bool { return s.remoteIn.refused.Load() > 0 }), "remote write was tried")
	_, err := c.Stop(60 * time.Second)
	require.NoError(t, err)

	startCollector(t, p, env)
	second := simConfig(p, "vector-index-build", 52)
	second.InstanceID = "vector-index-build-1" // a restarted service: new series
	want := truthTotals(runSim(t, second))
	for k, v := range first {
		want[k] += v
	}
	s.remoteIn.down.Store(false)

	var got totals
	ok := binarytest.Eventually(2*time.Minute, func() bool {
		got, err = resetAwareTotals(s.remote)
		return err == nil && maps.Equal(got, want)
	})
	require.True(t, ok, "remote write: got %v (%v), want %v", got, err, want)
}

// resetAwareTotals is prometheusTotals over every stored sample of each
// series: a value lower than the one before is a reset (the series counted
// again from zero), so a series' total is its last value plus the value
// before each reset.
func resetAwareTotals(p *prometheusServer) (totals, error) {
	out := totals{}
	add := func(key, selector, label string) error {
		series, err := p.Samples(selector + "[1h]")
		if err != nil {
			return err
		}
		for _, sr := range series {
			total, prev := 0.0, 0.0
			for i, v := range sr.Values {
				if i > 0 && v < prev {
					total += prev
				}
				prev = v
			}
			total += prev
			k := key
			if label != "" {
				k = key + "{" + sr.Metric[label] + "}"
			}
			out[k] += total
		}
		return nil
	}
	for _, q := range []struct{ key, selector, label string }{
		{"build.jobs", "build_jobs_total", "build_result"},
		{"build.stage.runs", "build_stage_runs_total", ""},
		{"api.requests", "api_requests_total", ""},
		{"sdk.counter", "buildsvc_vectors_indexed_total", ""},
		{"sdk.histogram.count", "buildsvc_index_size_bytes_count", ""},
	} {
		if err := add(q.key, q.selector, q.label); err != nil {
			return nil, err
		}
	}
	return out, nil
}
