// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter"

import (
	"context"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/adaptiverate"
	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/delta"
	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/drain"
	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/metadata"
	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/queuecompress"
	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/send"
	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/translate"
	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/writefailure"
)

// metricsExporter is the exporter the collector runs: Start, ConsumeMetrics
// and Shutdown are here. It is exporterhelper (sending queue, retries,
// timeout) around pushMetrics (push.go: translate with internal/translate,
// pack, send with internal/send; settle.go: what to retry), with what comes
// before the queue: the cumulative to delta conversion (internal/delta), so
// that what the queue holds, retries and replays after a restart is exact,
// and the write failure buffer (internal/writefailure). exporterhelper's
// start and shutdown hooks open and close the output destination
// (destination.go) and the cumulative state (cumulativestate.go); at
// Shutdown, the drain (internal/drain).
type metricsExporter struct {
	exporter.Metrics
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

	id         component.ID
	cfg        *Config
	logger     *zap.Logger
	telemetry  *metadata.TelemetryBuilder
	deltas     *delta.Converter
	translator *translate.Translator
	series     *translate.SeriesLimiter // nil: max_series_per_metric 0
	slots      chan struct{}            // bounds the requests in flight, across concurrent exports
	pace       *adaptiverate.Limiter
	now        func() time.Time
	// throttleDelay is the least wait before a throttled request is retried.
	throttleDelay time.Duration

	// saveFailing: the last save of the cumulative state failed.
	saveFailing atomic.Bool

	// set by start
	putter   send.Putter
	dryRun   atomic.Bool
	file     *os.File
	resolver *send.CredentialsResolver // output_destination auto only
	answered *send.AnsweredRequests    // nil: no persistent queue, or a dry run
	host     component.Host
	// autoDryRunReported: the auto dry run was reported as component status.
	autoDryRunReported atomic.Bool
	// sending: whether PutMetricData gets through, as component status.
	sending sendStatus
	// handoff: nil without handoff.endpoint (handoff.go).
	handoff           *handoff
	telemetrySettings component.TelemetrySettings

	translations sync.Pool
}

// Start starts exporterhelper, then the writer of held data.
func (m *metricsExporter) Start(ctx context.Context, host component.Host) error {
	if q := m.cfg.QueueConfig.Get(); q != nil && q.StorageID != nil {
		// The persistent queue's requests are stored compressed.
		host = queuecompress.NewHost(host, *q.StorageID, m.id, queueClientName, isQueueItemKey)
	}
	if err := m.Metrics.Start(ctx, host); err != nil {
		return err
	}
	if m.held != nil {
		m.held.Start()
	}
	if m.answered != nil {
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
	var cv delta.Conversion
	m.deltas.Convert(ctx, md, m.now(), &cv)
	m.recordDropped(ctx, &cv.Dropped)
	if cv.Evictions > 0 {
		m.telemetry.ExporterCloudwatchCumulativeEvictions.Add(ctx, cv.Evictions)
	}
	m.recordStorageErrors(ctx, storageRead, cv.ReadErrors)
	err := m.enqueue(ctx, md)
	if err != nil {
		// The data did not get through: take the conversion back so that the
		// next cumulative point's delta covers it again.
		if failed, ok := errors.AsType[consumererror.Metrics](err); ok {
			m.deltas.UndoPoints(failed.Data())
		} else if m.refusedByQueue(err) || writefailure.Refused(err) {
			m.deltas.Undo(cv.Records)
		}
	}
	// Only now, with the data queued (or the conversion undone), is the
	// state worth saving: what is saved never runs ahead of the queue.
	if m.deltas.Store != nil && (len(cv.Records) > 0 || cv.Evictions > 0) {
		m.saveState(ctx, cv.Records)
	}
	return err
}

// Shutdown sends what is queued, for at most shutdown_drain_timeout, hands
// what is left to the peer when there is one (handoff.go), and only then
// stops exporterhelper. Upstream components are stopped before
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
	if q := m.cfg.QueueConfig.Get(); q != nil {
		drain.Wait(ctx, drain.Settings{
			Timeout: m.cfg.ShutdownDrainTimeout, Size: m.queue.size,
			Unit: q.Sizer.String(), Persistent: q.StorageID != nil, Logger: m.logger,
		})
		m.handOffLeftovers(ctx)
	}
	err := m.Metrics.Shutdown(ctx)
	if m.handoff != nil {
		err = errors.Join(err, m.handoff.close())
	}
	return err
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
	cfg := m.cfg
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
		Logger:           m.logger,
		Failures:         m.telemetry.ExporterCloudwatchQueueWriteFailures,
		Consume:          m.Metrics.ConsumeMetrics,
		QueueSize:        m.queue.size,
		Turn:             m.turn,
	})
	held := m.held
	return m.telemetry.RegisterExporterCloudwatchQueueWriteBufferBytesCallback(func(_ context.Context, o metric.Int64Observer) error {
		o.Observe(held.Bytes())
		return nil
	})
}

// newMetricsExporter returns the exporter without exporterhelper around it
// (createMetrics puts it there).
func newMetricsExporter(cfg *Config, set exporter.Settings) (*metricsExporter, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	e := &metricsExporter{
		queue:      &queueSizeProbe{},
		turn:       make(chan struct{}, 1),
		id:         set.ID,
		cfg:        cfg,
		logger:     set.Logger,
		telemetry:  tb,
		translator: translate.NewTranslator(translatorConfig(cfg)),
		deltas:     delta.NewLoggedConverter(cfg.CumulativeState.trackerConfig(), set.Logger),
		series:     translate.NewSeriesLimiter(cfg.MaxSeriesPerMetric, set.Logger),
		slots:      make(chan struct{}, cfg.MaxConcurrentRequests),
		now:        time.Now,

		throttleDelay:     throttleRetryDelay,
		telemetrySettings: set.TelemetrySettings,
	}
	if cfg.Handoff.enabled() {
		e.handoff = &handoff{cfg: &cfg.Handoff}
	}
	e.pace = adaptiverate.New(cfg.MaxRequestsPerSecond, time.Now)
	e.translations.New = func() any { return new(translationBuffers) }
	err = tb.RegisterExporterCloudwatchCumulativeSeriesCallback(func(_ context.Context, o metric.Int64Observer) error {
		o.Observe(int64(e.deltas.SeriesCount()))
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = tb.RegisterExporterCloudwatchRequestRateLimitCallback(func(_ context.Context, o metric.Float64Observer) error {
		o.Observe(e.pace.Limit())
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = tb.RegisterExporterCloudwatchDryRunCallback(func(_ context.Context, o metric.Int64Observer) error {
		if e.dryRun.Load() {
			o.Observe(1)
		} else {
			o.Observe(0)
		}
		return nil
	})
	return e, err
}
