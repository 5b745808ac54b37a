// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derive

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"
)

// ProcessorSpec is what a processor component hands the shared derivation.
type ProcessorSpec struct {
	ID         component.ID
	Output     OutputConfig
	Cumulative CumulativeConfig
	// State persists the cumulative baselines and the counts not yet
	// handed over; a nil Storage keeps them in memory only.
	State     StateConfig
	ScopeName string // instrumentation scope of the derived metrics
	Telemetry Telemetry
	// ConnectorType is the type of the connector that can also derive
	// api.requests (from spans); beside one that does, Start stands the
	// processor down.
	ConnectorType component.Type
}

// HTTPProcessor derives api.requests from HTTP server duration histograms
// and passes every metric through unchanged.
type HTTPProcessor struct {
	spec    ProcessorSpec
	emitter *emitter
	state   *derivationState
	// standDown: a connector of the same collector derives api.requests
	// from spans, so this processor passes metrics through and derives
	// nothing (every request would otherwise count twice).
	standDown bool
}

// NewHTTPProcessor returns a processor that emits to next.
func NewHTTPProcessor(set component.TelemetrySettings, spec ProcessorSpec, next consumer.Metrics) *HTTPProcessor {
	d := newProcessorDeriver(&spec.Output, spec.Cumulative, time.Now(), set.Logger)
	d.scopeName = spec.ScopeName
	return &HTTPProcessor{spec: spec, emitter: newEmitter(set, spec.Telemetry, d, spec.Output.MetricsFlushInterval, next)}
}

// APIRequestSources is implemented by the connector factory: the
// connectors it created that derive api.requests from spans.
type APIRequestSources interface {
	APIRequestsFromSpans() []component.ID
}

// Start stands the processor down, with a warning, when a connector of
// the same collector derives api.requests from spans: the two would count
// every request twice, and the deployer asked for spans
// (api_requests_from_spans: true, GPUBUILD_API_REQUESTS_FROM_SPANS).
func (p *HTTPProcessor) Start(ctx context.Context, host component.Host) error {
	if fh, ok := host.(factoryHost); ok {
		if src, ok := fh.GetFactory(component.KindConnector, p.spec.ConnectorType).(APIRequestSources); ok {
			if ids := src.APIRequestsFromSpans(); len(ids) > 0 {
				names := make([]string, len(ids))
				for i, id := range ids {
					names[i] = fmt.Sprintf("connector %q", id)
				}
				p.standDown = true
				p.emitter.logger.Warn(fmt.Sprintf("processor %q derives nothing: %s derives api.requests from spans (api_requests_from_spans: true), and counting the HTTP server histograms too would count every request twice; the processor passes metrics through unchanged",
					p.spec.ID, strings.Join(names, " and ")))
				return nil
			}
		}
	}
	if p.spec.State.Storage != nil {
		if err := p.openState(ctx, host); err != nil {
			return err
		}
	} else {
		warnInMemory(p.emitter.logger, "a restart counts the service's cumulative HTTP histograms again from their start and loses the counts not yet emitted")
	}
	p.emitter.start()
	return nil
}

// openState restores the counts not yet handed over and the cumulative
// baselines, which share one storage client and one write per request.
func (p *HTTPProcessor) openState(ctx context.Context, host component.Host) error {
	e := p.emitter
	e.mu.Lock()
	defer func() {
		stats := e.d.takeStats()
		e.mu.Unlock()
		e.report(ctx, &stats)
	}()
	now := e.now()
	st, err := openState(ctx, host, p.spec.ID, component.KindProcessor, p.spec.State, e.d, now, e.logger)
	if err != nil {
		return err
	}
	load := e.d.httpTracker.Attach(ctx, batchJoiner{Client: st.client, st: st}, now)
	if load.ReadErrors > 0 {
		e.d.stats.stateSkipped[stateSkipCorrupted] += load.ReadErrors
		e.logger.Warn("Some cumulative baselines could not be read: the next point of those series is a baseline",
			zap.String("storage", st.location), zap.Int64("entries", load.ReadErrors))
	}
	e.logger.Info("Restored the cumulative baselines", zap.String("storage", st.location),
		zap.Int("series", load.Restored), zap.Int("expired", load.Expired))
	// What the restore deleted is written now.
	if err := st.persist(ctx, e.d); err != nil {
		e.logger.Warn("Failed to write the restored state", zap.String("storage", st.location), zap.Error(err))
	}
	p.state = st
	return nil
}

// Shutdown emits what was derived since the last flush.
func (p *HTTPProcessor) Shutdown(ctx context.Context) error {
	if p.standDown {
		return nil
	}
	err := p.emitter.shutdown(ctx)
	if p.state != nil {
		e := p.emitter
		e.mu.Lock()
		err = errors.Join(err, e.d.httpTracker.Close(ctx), p.state.persist(ctx, e.d), p.state.close(ctx))
		e.mu.Unlock()
	}
	return err
}

// ProcessMetrics derives api.requests from md and returns md unchanged.
func (p *HTTPProcessor) ProcessMetrics(ctx context.Context, md pmetric.Metrics) (pmetric.Metrics, error) {
	if p.standDown {
		return md, nil
	}
	p.emitter.update(ctx, func(d *deriver, now time.Time) { d.consumeHTTPMetrics(md, now) })
	return md, nil
}
