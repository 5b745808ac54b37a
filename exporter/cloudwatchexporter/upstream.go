// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter"

import (
	"context"
	"errors"
	"sync"

	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/otel/metric"
)

// Everything in this exporter that depends on how an upstream module
// behaves, beyond its documented API, is in this file; each coupling has a
// guard test in upstream_test.go that fails when the upstream behaviour
// changes:
//
//   - queueSizeProbe reads the sending queue's size from exporterhelper's
//     own telemetry (TestQueueSizeIsExporterhelpers).
//   - refusedByQueue tells a refused enqueue by exporterhelper's errors
//     (TestQueueRefusalErrorsAreExporterhelpers).
//   - queueClientName and isQueueItemKey: the persistent queue asks its
//     storage for the client named after the signal and stores each
//     request under its decimal index, its metadata under other keys; the
//     requests are stored compressed (internal/queuecompress)
//     (TestQueuedRequestsAreStoredCompressed).
//   - the persistent queue's enqueue returns once the request is written
//     to the storage, so a peer's ConsumeMetrics that returned means the
//     hand-off is on its disk (handoff.go;
//     TestConsumeMetricsReturnsOnceTheRequestIsStored).
//   - internal/send's upstream.go, presetBodyProtocol and
//     minCompressBytes: the SDK's client protocol sends a body written by
//     internal/send in the SDK's own CBOR encoding, gzipped above the
//     SDK's threshold (TestRequestBodyIsTheSDKs, TestRequestBodyGzipAndReuse,
//     in this package's upstream_test.go).

// queueSizeProbe exists because Shutdown must wait until the sending queue
// is empty (exporterhelper v0.161's persistent queue does not drain at
// Shutdown, open-telemetry/opentelemetry-collector#5902), and exporterhelper
// exposes the queue's size only through its telemetry: a callback it
// registers for the otelcol_exporter_queue_size gauge. queueSizeProbe sits
// between exporterhelper and the real MeterProvider, keeps that callback and
// calls it on demand. The telemetry itself is unchanged.
//
// Both queues count a request until it is done, that is exported or given
// up after its retries, batcher included: a size of 0 means nothing is
// left to send.

// queueClientName is the name of the persistent queue's storage client:
// its signal's.
const queueClientName = "metrics"

// isQueueItemKey reports whether key is one of the persistent queue's
// requests: their keys are their decimal indexes.
func isQueueItemKey(key string) bool {
	if key == "" {
		return false
	}
	for i := range len(key) {
		if key[i] < '0' || key[i] > '9' {
			return false
		}
	}
	return true
}

const (
	// exporterhelperMeterName is the instrumentation scope of exporterhelper's telemetry.
	exporterhelperMeterName = "go.opentelemetry.io/collector/exporter/exporterhelper"
	queueSizeMetricName     = "otelcol_exporter_queue_size"
)

// queueSizeProbe reads the size of exporterhelper's sending queue, in the
// units of sending_queue::sizer (requests by default).
type queueSizeProbe struct {
	mu       sync.Mutex
	gauge    *queueSizeGauge
	callback metric.Callback
}

// meterProvider wraps mp so that the probe sees exporterhelper's queue size callback.
func (p *queueSizeProbe) meterProvider(mp metric.MeterProvider) metric.MeterProvider {
	return probeMeterProvider{MeterProvider: mp, probe: p}
}

// size calls exporterhelper's queue size callback. ok is false when no
// queue registered one (no sending_queue).
func (p *queueSizeProbe) size(ctx context.Context) (size int64, ok bool) {
	p.mu.Lock()
	gauge, callback := p.gauge, p.callback
	p.mu.Unlock()
	if callback == nil {
		return 0, false
	}
	o := &sizeObserver{gauge: gauge}
	if err := callback(ctx, o); err != nil {
		return 0, false
	}
	return o.size, o.seen
}

func (p *queueSizeProbe) registered(gauge *queueSizeGauge, callback metric.Callback) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gauge, p.callback = gauge, callback
}

type probeMeterProvider struct {
	metric.MeterProvider
	probe *queueSizeProbe
}

func (p probeMeterProvider) Meter(name string, opts ...metric.MeterOption) metric.Meter {
	m := p.MeterProvider.Meter(name, opts...)
	if name != exporterhelperMeterName {
		return m
	}
	return probeMeter{Meter: m, probe: p.probe}
}

type probeMeter struct {
	metric.Meter
	probe *queueSizeProbe
}

// queueSizeGauge is the queue size instrument handed to exporterhelper: a
// pointer of our own, so that it can be told from every other instrument
// (noop instruments, for one, are all equal).
type queueSizeGauge struct {
	metric.Int64ObservableGauge // the real one
}

func (m probeMeter) Int64ObservableGauge(name string, opts ...metric.Int64ObservableGaugeOption) (metric.Int64ObservableGauge, error) {
	g, err := m.Meter.Int64ObservableGauge(name, opts...)
	if err != nil || name != queueSizeMetricName {
		return g, err
	}
	return &queueSizeGauge{Int64ObservableGauge: g}, nil
}

// RegisterCallback registers f with the real meter, with the real
// instruments, and keeps it when it observes the queue size.
func (m probeMeter) RegisterCallback(f metric.Callback, instruments ...metric.Observable) (metric.Registration, error) {
	var gauge *queueSizeGauge
	forward := make([]metric.Observable, len(instruments))
	for i, inst := range instruments {
		forward[i] = inst
		if g, ok := inst.(*queueSizeGauge); ok {
			gauge, forward[i] = g, g.Int64ObservableGauge
		}
	}
	if gauge == nil {
		return m.Meter.RegisterCallback(f, instruments...)
	}
	reg, err := m.Meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		return f(ctx, realObserver{Observer: o})
	}, forward...)
	if err == nil {
		m.probe.registered(gauge, f)
	}
	return reg, err
}

// realObserver hands the real instrument to the real observer.
type realObserver struct {
	metric.Observer
}

func (o realObserver) ObserveInt64(inst metric.Int64Observable, value int64, opts ...metric.ObserveOption) {
	if g, ok := inst.(*queueSizeGauge); ok {
		inst = g.Int64ObservableGauge
	}
	o.Observer.ObserveInt64(inst, value, opts...)
}

// sizeObserver records what the callback observes for the queue size.
type sizeObserver struct {
	metric.Observer // nil: only ObserveInt64 is called
	gauge           *queueSizeGauge
	size            int64
	seen            bool
}

func (o *sizeObserver) ObserveInt64(inst metric.Int64Observable, value int64, _ ...metric.ObserveOption) {
	if g, ok := inst.(*queueSizeGauge); ok && g == o.gauge {
		o.size += value
		o.seen = true
	}
}

func (*sizeObserver) ObserveFloat64(metric.Float64Observable, float64, ...metric.ObserveOption) {}

// refusedByQueue tells whether err means the sending queue did not take the
// data: it was full or, with block_on_overflow, the caller gave up waiting
// for room (its context ended). An in-memory queue with wait_for_result
// also returns a context error for data it did take.
func (m *metricsExporter) refusedByQueue(err error) bool {
	if errors.Is(err, exporterhelper.ErrQueueIsFull) {
		return true
	}
	q := m.cfg.QueueConfig.Get()
	if q == nil || !q.BlockOnOverflow || (q.WaitForResult && q.StorageID == nil) {
		return false
	}
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
