// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package buildsim

import (
	"context"
	"sync"
	"time"

	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// spanBuffer is a span processor that keeps ended spans until the runner
// exports them itself, so the runner knows which export carried which span
// and the SDK never drops one for a full queue.
type spanBuffer struct {
	mu    sync.Mutex
	spans []sdktrace.ReadOnlySpan
}

func (b *spanBuffer) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

func (b *spanBuffer) OnEnd(s sdktrace.ReadOnlySpan) {
	b.mu.Lock()
	b.spans = append(b.spans, s)
	b.mu.Unlock()
}

func (b *spanBuffer) Shutdown(context.Context) error { return nil }

func (b *spanBuffer) ForceFlush(context.Context) error { return nil }

func (b *spanBuffer) take() []sdktrace.ReadOnlySpan {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.spans
	b.spans = nil
	return s
}

// logBuffer is the same for log records.
type logBuffer struct {
	mu      sync.Mutex
	records []sdklog.Record
}

func (b *logBuffer) Enabled(context.Context, sdklog.EnabledParameters) bool { return true }

func (b *logBuffer) OnEmit(_ context.Context, r *sdklog.Record) error {
	b.mu.Lock()
	b.records = append(b.records, r.Clone())
	b.mu.Unlock()
	return nil
}

func (b *logBuffer) Shutdown(context.Context) error { return nil }

func (b *logBuffer) ForceFlush(context.Context) error { return nil }

func (b *logBuffer) take() []sdklog.Record {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.records
	b.records = nil
	return r
}

// countingMetricExporter counts the data points of each metric export and
// remembers whether every export of the latest collection succeeded: the
// points are cumulative, so only the last collection of an incarnation must
// arrive for nothing to be lost. A collection may take several exports
// (MetricMaxBatch); its points all carry the collection's time.
type countingMetricExporter struct {
	sdkmetric.Exporter
	r *runner
	// guarded by r.mu
	latest       time.Time
	latestFailed bool
}

func (e *countingMetricExporter) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	err := e.Exporter.Export(ctx, rm)
	e.r.mu.Lock()
	defer e.r.mu.Unlock()
	if at, ok := collectionTime(rm); ok {
		switch {
		case at.After(e.latest):
			e.latest, e.latestFailed = at, err != nil
		case at.Equal(e.latest) && err != nil:
			e.latestFailed = true
		}
	}
	e.r.exports.MetricPoints.record(countPoints(rm), err)
	if err != nil {
		e.r.opts.logf("buildsim: exporting metrics: %v", err)
	}
	return err
}

// collectionTime is the time of the first data point: the SDK gives every
// point of one collection the same time.
func collectionTime(rm *metricdata.ResourceMetrics) (time.Time, bool) {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				if len(d.DataPoints) > 0 {
					return d.DataPoints[0].Time, true
				}
			case metricdata.Gauge[float64]:
				if len(d.DataPoints) > 0 {
					return d.DataPoints[0].Time, true
				}
			case metricdata.Histogram[float64]:
				if len(d.DataPoints) > 0 {
					return d.DataPoints[0].Time, true
				}
			}
		}
	}
	return time.Time{}, false
}

func countPoints(rm *metricdata.ResourceMetrics) int {
	n := 0
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				n += len(d.DataPoints)
			case metricdata.Sum[float64]:
				n += len(d.DataPoints)
			case metricdata.Gauge[float64]:
				n += len(d.DataPoints)
			case metricdata.Gauge[int64]:
				n += len(d.DataPoints)
			case metricdata.Histogram[float64]:
				n += len(d.DataPoints)
			case metricdata.Histogram[int64]:
				n += len(d.DataPoints)
			}
		}
	}
	return n
}
