// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package temporalityprocessor // import "github.com/gpubuild/otelcol-gpubuild/processor/temporalityprocessor"

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/gpubuild/otelcol-gpubuild/internal/cumulative"
	"github.com/gpubuild/otelcol-gpubuild/internal/state"
	"github.com/gpubuild/otelcol-gpubuild/processor/temporalityprocessor/internal/metadata"
)

// stateStorageName names the processor's client of the storage extension.
const stateStorageName = "temporality_state"

// temporalityProcessor converts each batch, hands it on, and only then
// saves the state it moved: a refused batch's conversion is taken back, so
// what is saved never runs ahead of what the next consumer accepted.
type temporalityProcessor struct {
	cfg    *Config
	id     component.ID
	logger *zap.Logger
	tel    *metadata.TelemetryBuilder
	next   consumer.Metrics

	tracker *cumulative.Tracker
	convert func(ctx context.Context, md pmetric.Metrics, now time.Time, r *cumulative.Result)
	now     func() time.Time

	// turn makes convert, hand on and undo one step per batch: were two
	// batches interleaved, a refused conversion could not be taken back once
	// a later point of the same series had been converted.
	turn sync.Mutex

	// storage is the state's client of the storage extension (under the
	// journal, when there is one); nil keeps the state in memory.
	storage     storage.Client
	saveFailing atomic.Bool

	reasonAttrs [cumulative.NumReasons]metric.AddOption
	readAttrs   metric.AddOption
	writeAttrs  metric.AddOption
}

func newTemporalityProcessor(set processor.Settings, cfg *Config, next consumer.Metrics) (*temporalityProcessor, error) {
	tel, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	p := &temporalityProcessor{
		cfg: cfg, id: set.ID, logger: set.Logger, tel: tel, next: next,
		tracker: cumulative.New(cfg.trackerConfig(), set.Logger),
		now:     time.Now,
	}
	if cfg.To == ToCumulative {
		p.convert = p.tracker.Accumulate
	} else {
		p.convert = p.tracker.Convert
	}
	for r := range cumulative.NumReasons {
		p.reasonAttrs[r] = metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", r.String())))
	}
	p.readAttrs = metric.WithAttributeSet(attribute.NewSet(attribute.String("operation", "read")))
	p.writeAttrs = metric.WithAttributeSet(attribute.NewSet(attribute.String("operation", "write")))
	if err := tel.RegisterTemporalitySeriesCallback(func(_ context.Context, o metric.Int64Observer) error {
		o.Observe(int64(p.tracker.Len()))
		return nil
	}); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *temporalityProcessor) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: true}
}

// Start restores the state a previous process saved, or says once that
// there is none to restore from.
func (p *temporalityProcessor) Start(ctx context.Context, host component.Host) error {
	id := p.cfg.State.Storage
	if id == nil {
		state.WarnInMemory(p.logger, "temporality state", "state", "after a restart every series starts again "+
			"(cumulative series reset, the first cumulative point of each series is not sent as a delta)",
			zap.String("to", p.cfg.To))
		return nil
	}
	st, err := state.Open(ctx, host, p.cfg.State, state.Owner{
		Kind: component.KindProcessor, ID: p.id, Client: stateStorageName,
		Field: "state", What: "temporality state", Logger: p.logger,
	})
	if err != nil {
		return err
	}
	client := st.Client
	p.storage = client
	load := p.tracker.Attach(ctx, client, p.now())
	if load.ReadErrors > 0 {
		p.tel.TemporalityStateErrors.Add(ctx, load.ReadErrors, p.readAttrs)
	}
	if load.Expired > 0 {
		p.tel.TemporalitySeriesEvicted.Add(ctx, int64(load.Expired))
	}
	fields := []zap.Field{zap.String("to", p.cfg.To), zap.Int("series", load.Restored), zap.Int("expired", load.Expired), zap.String("storage", id.String())}
	switch {
	case load.ReadErrors > 0:
		p.logger.Warn("Some temporality state could not be read: those series start again",
			append(fields, zap.Int64("read_errors", load.ReadErrors))...)
	case load.Listed:
		p.logger.Info("Restored the temporality state", fields...)
	}
	return nil
}

// ConsumeMetrics converts md and hands it on. When the next consumer
// refuses it, the conversion is taken back and the refusal returned, so the
// same data offered again is converted as if for the first time.
func (p *temporalityProcessor) ConsumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	p.turn.Lock()
	defer p.turn.Unlock()
	var r cumulative.Result
	p.convert(ctx, md, p.now(), &r)
	p.report(ctx, &r)
	var err error
	// Counted first: once offered, md is the next consumer's to change.
	if points := md.DataPointCount(); points > 0 {
		if err = p.next.ConsumeMetrics(ctx, md); err != nil {
			p.tracker.Undo(r.Records)
			p.tel.TemporalityPointsRefused.Add(ctx, int64(points))
		}
	}
	if p.storage != nil && (len(r.Records) > 0 || r.Evictions > 0) {
		p.save(ctx, r.Records)
	}
	return err
}

func (p *temporalityProcessor) report(ctx context.Context, r *cumulative.Result) {
	for reason, n := range r.Dropped {
		if n > 0 {
			p.tel.TemporalityPointsDropped.Add(ctx, int64(n), p.reasonAttrs[reason])
		}
	}
	if r.Evictions > 0 {
		p.tel.TemporalitySeriesEvicted.Add(ctx, r.Evictions)
	}
	if r.ReadErrors > 0 {
		p.tel.TemporalityStateErrors.Add(ctx, r.ReadErrors, p.readAttrs)
	}
}

func (p *temporalityProcessor) save(ctx context.Context, records []cumulative.Record) {
	if err := p.tracker.Save(ctx, records); err != nil {
		p.tel.TemporalityStateErrors.Add(ctx, 1, p.writeAttrs)
		if !p.saveFailing.Swap(true) { // when it starts failing, not every time
			p.logger.Warn("Could not save the temporality state; a restart now may reset or repeat some series", zap.Error(err))
		}
		return
	}
	p.saveFailing.Store(false)
}

// Shutdown writes what is left of the state and closes its storage client.
func (p *temporalityProcessor) Shutdown(ctx context.Context) error {
	p.turn.Lock()
	defer p.turn.Unlock()
	err := p.tracker.Close(ctx)
	p.tel.Shutdown()
	return err
}
