// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter"

import (
	"context"
	"errors"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/metric"

	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/queuecompress"
	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/writefailure"
)

// metricsExporter is the exporter the collector runs: Start, ConsumeMetrics
// and Shutdown are here. It is exporterhelper (sending queue, retries,
// timeout) around cloudWatchExporter's pushMetrics (push.go: translate,
// pack, send), with what comes before the queue: the cumulative to delta
// conversion (delta.go), so that what the queue holds, retries and replays
// after a restart is exact, and the write failure buffer
// (internal/writefailure); at Shutdown, the drain (drain.go).
type metricsExporter struct {
	exporter.Metrics
	exp   *cloudWatchExporter
	queue *queueSizeProbe
	// turn makes conversion, enqueue and undo one step per request. Were
	// two requests interleaved, an undone conversion could not be taken
	// back once a later point of the same series had been converted, and
	// its increment would be lost.
	turn chan struct{}
	// held is what the persistent queue could not write
	// (internal/writefailure); nil without a persistent queue.
	held *writefailure.Stage
	// answeredStop and answeredDone stop forgetAnsweredOnceQueueEmpty.
	answeredStop, answeredDone chan struct{}
}

// Start starts exporterhelper, then the writer of held data.
func (m *metricsExporter) Start(ctx context.Context, host component.Host) error {
	if q := m.exp.cfg.QueueConfig.Get(); q != nil && q.StorageID != nil {
		// The persistent queue's requests are stored compressed.
		host = queuecompress.NewHost(host, *q.StorageID, m.exp.id, queueClientName, isQueueItemKey)
	}
	if err := m.Metrics.Start(ctx, host); err != nil {
		return err
	}
	if m.held != nil {
		m.held.Start()
	}
	if m.exp.answered != nil {
		m.answeredStop, m.answeredDone = make(chan struct{}), make(chan struct{})
		go m.forgetAnsweredOnceQueueEmpty()
	}
	return nil
}

// ConsumeMetrics converts cumulative points to deltas and queues the
// request, one request at a time; what the queue refuses has its
// conversion undone.
func (m *metricsExporter) ConsumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	select {
	case m.turn <- struct{}{}:
		defer func() { <-m.turn }()
	case <-ctx.Done():
		return ctx.Err()
	}
	var cv conversion
	m.exp.deltas.convert(ctx, md, m.exp.now(), &cv)
	m.exp.recordDropped(ctx, &cv.dropped)
	if cv.evictions > 0 {
		m.exp.telemetry.ExporterCloudwatchCumulativeEvictions.Add(ctx, cv.evictions)
	}
	m.exp.recordStorageErrors(ctx, storageRead, cv.readErrors)
	err := m.enqueue(ctx, md)
	if err != nil {
		// The data did not get through: take the conversion back so that the
		// next cumulative point's delta covers it again.
		if failed, ok := errors.AsType[consumererror.Metrics](err); ok {
			m.exp.deltas.undoPoints(failed.Data())
		} else if m.refusedByQueue(err) || writefailure.Refused(err) {
			m.exp.deltas.undo(cv.records)
		}
	}
	// Only now, with the data queued (or the conversion undone), is the
	// state worth saving: what is saved never runs ahead of the queue.
	if m.exp.deltas.store != nil && (len(cv.records) > 0 || cv.evictions > 0) {
		m.exp.saveState(ctx, cv.records)
	}
	return err
}

// Shutdown sends what is queued, for at most shutdown_drain_timeout, and
// only then stops exporterhelper. Upstream components are stopped before
// an exporter is, so nothing new arrives meanwhile.
//
// exporterhelper's own Shutdown stops a persistent queue's consumers at
// once, leaving what is queued on disk for the next start
// (open-telemetry/opentelemetry-collector#5902); a sidecar whose pod is
// deleted loses its disk with it. The in-memory queue does drain, but with
// retries off: waiting here gives its requests their retries too.
func (m *metricsExporter) Shutdown(ctx context.Context) error {
	if m.answeredStop != nil {
		close(m.answeredStop)
		<-m.answeredDone
	}
	if m.held != nil {
		m.held.Stop(ctx)
	}
	m.drainQueue(ctx)
	return m.Metrics.Shutdown(ctx)
}

// enqueue hands md to the sending queue, through the write failure stage
// when there is one. Called with the turn held.
func (m *metricsExporter) enqueue(ctx context.Context, md pmetric.Metrics) error {
	if m.held == nil {
		return m.Metrics.ConsumeMetrics(ctx, md)
	}
	return m.held.Enqueue(ctx, md)
}

// setUpWriteFailure puts the write failure stage in front of a persistent
// queue.
func (m *metricsExporter) setUpWriteFailure() error {
	cfg := m.exp.cfg
	q := cfg.QueueConfig.Get()
	if q == nil || q.StorageID == nil {
		return nil
	}
	m.held = writefailure.New(writefailure.Settings{
		Storage:          *q.StorageID,
		LimitBytes:       cfg.WriteFailureBufferBytes,
		ReserveDirectory: cfg.WriteReserveDirectory,
		ReserveBytes:     cfg.WriteReserveBytes,
		QueueSizer:       q.Sizer.String(),
		QueueCap:         q.QueueSize,
		Logger:           m.exp.logger,
		Failures:         m.exp.telemetry.ExporterCloudwatchQueueWriteFailures,
		Consume:          m.Metrics.ConsumeMetrics,
		QueueSize:        m.queue.size,
		Turn:             m.turn,
	})
	held := m.held
	return m.exp.telemetry.RegisterExporterCloudwatchQueueWriteBufferBytesCallback(func(_ context.Context, o metric.Int64Observer) error {
		o.Observe(held.Bytes())
		return nil
	})
}
