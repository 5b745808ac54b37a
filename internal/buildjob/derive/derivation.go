// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derive

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/gpubuild/otelcol-gpubuild/internal/buildjob/derivestate"
	"github.com/gpubuild/otelcol-gpubuild/internal/gpucost"
)

// JobSpec is what the connector component builds its derivation from:
// job runs, stages and (optionally) API requests from spans and job status
// log records.
type JobSpec struct {
	Output    OutputConfig
	Jobs      JobConfig
	ScopeName string // instrumentation scope of the derived metrics
	Telemetry Telemetry
}

// HTTPSpec is what the processor component builds its derivation from:
// api.requests from the service's HTTP server duration histograms.
type HTTPSpec struct {
	Output     OutputConfig
	Cumulative CumulativeConfig
	ScopeName  string // instrumentation scope of the derived metrics
	Telemetry  Telemetry
}

// Derivation is one component's derivation: the deriver (the rules and the
// series), the emitter that hands what was derived to the next consumer
// every flush interval, and the state that keeps both across restarts. The
// component owns its lifecycle: it opens the state (OpenState), starts,
// feeds and shuts the derivation down.
type Derivation struct {
	emitter *emitter
	kind    component.Kind
	id      component.ID
	// http: the processor's derivation, whose cumulative baselines are
	// part of its state.
	http  bool
	state *derivationState
}

// NewJobDerivation returns the connector's derivation, emitting to next.
func NewJobDerivation(set component.TelemetrySettings, id component.ID, spec JobSpec, next consumer.Metrics) (*Derivation, error) {
	d := newConnectorDeriver(&jobSettings{OutputConfig: spec.Output, JobConfig: spec.Jobs}, time.Now())
	d.scopeName = spec.ScopeName
	e, err := newEmitter(set, spec.Telemetry, d, spec.Output.MetricsFlushInterval, next)
	if err != nil {
		return nil, err
	}
	return &Derivation{emitter: e, kind: component.KindConnector, id: id}, nil
}

// NewHTTPDerivation returns the processor's derivation, emitting to next.
func NewHTTPDerivation(set component.TelemetrySettings, id component.ID, spec HTTPSpec, next consumer.Metrics) (*Derivation, error) {
	d := newProcessorDeriver(&spec.Output, spec.Cumulative, time.Now(), set.Logger)
	d.scopeName = spec.ScopeName
	e, err := newEmitter(set, spec.Telemetry, d, spec.Output.MetricsFlushInterval, next)
	if err != nil {
		return nil, err
	}
	return &Derivation{emitter: e, kind: component.KindProcessor, id: id, http: true}, nil
}

// Logger is the component's logger.
func (d *Derivation) Logger() *zap.Logger { return d.emitter.logger }

// UseGPUSampler gives each counted run its GPU figures from s's samples.
func (d *Derivation) UseGPUSampler(s gpucost.Sampler) {
	e := d.emitter
	e.mu.Lock()
	defer e.mu.Unlock()
	e.d.setGPUSampler(s)
}

// OpenState opens the state in cfg.Storage (which must be set) and loads
// what a previous process saved there; call it before Start.
func (d *Derivation) OpenState(ctx context.Context, host component.Host, cfg derivestate.Config) error {
	e := d.emitter
	e.mu.Lock()
	defer func() {
		evicted := e.tally()
		e.mu.Unlock()
		e.warnEvicted(evicted)
	}()
	now := e.now()
	st, err := openState(ctx, host, d.id, d.kind, cfg, e.d, now, e.logger)
	if err != nil {
		return err
	}
	if d.http {
		load := e.d.httpTracker.Attach(ctx, st.store.Joiner(), now)
		if load.ReadErrors > 0 {
			e.d.stats.stateSkipped[derivestate.SkipCorrupted] += load.ReadErrors
			e.logger.Warn("Some cumulative baselines could not be read: the next point of those series is a baseline",
				zap.String("storage", st.store.Location()), zap.Int64("entries", load.ReadErrors))
		}
		e.logger.Info("Restored the cumulative baselines", zap.String("storage", st.store.Location()),
			zap.Int("series", load.Restored), zap.Int("expired", load.Expired))
		if err := st.persist(ctx, e.d); err != nil {
			e.logger.Warn("Failed to write the restored state", zap.String("storage", st.store.Location()), zap.Error(err))
		}
	}
	d.state = st
	return nil
}

// Start starts the flush loop.
func (d *Derivation) Start() { d.emitter.start() }

// Shutdown emits what is left (the final flush) and closes the state.
func (d *Derivation) Shutdown(ctx context.Context) error {
	err := d.emitter.shutdown(ctx)
	if d.state == nil {
		return err
	}
	if d.http {
		e := d.emitter
		e.mu.Lock()
		defer e.mu.Unlock()
		return errors.Join(err, e.d.httpTracker.Close(ctx), d.state.persist(ctx, e.d), d.state.store.Close(ctx))
	}
	return errors.Join(err, d.state.store.Close(ctx))
}

// Discard releases a derivation that was never started (a processor that
// stands down): its own telemetry goes, as Shutdown's does.
func (d *Derivation) Discard() { d.emitter.release() }

// ConsumeTraces derives from spans. Malformed spans are skipped and
// counted; nothing is refused.
func (d *Derivation) ConsumeTraces(ctx context.Context, td ptrace.Traces) {
	d.emitter.update(ctx, func(dv *deriver, now time.Time) { dv.consumeTraces(td, now) })
}

// ConsumeLogs derives job runs from status log records.
func (d *Derivation) ConsumeLogs(ctx context.Context, ld plog.Logs) {
	d.emitter.update(ctx, func(dv *deriver, now time.Time) { dv.consumeLogs(ld, now) })
}

// ConsumeHTTPMetrics derives api.requests from the HTTP server histograms
// of md, which it does not change.
func (d *Derivation) ConsumeHTTPMetrics(ctx context.Context, md pmetric.Metrics) {
	d.emitter.update(ctx, func(dv *deriver, now time.Time) { dv.consumeHTTPMetrics(md, now) })
}
