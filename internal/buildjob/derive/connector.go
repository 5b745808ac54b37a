// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derive

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// ConnectorSpec is what a connector component hands the shared derivation
// when it creates the state of one component id.
type ConnectorSpec struct {
	Output    OutputConfig
	Jobs      JobConfig
	ScopeName string // instrumentation scope of the derived metrics
	Telemetry Telemetry
	// State persists the run memory and the counts not yet handed over;
	// a nil Storage keeps them in memory only.
	State StateConfig
	// GPUSampler names the nvml_sampler extension whose samples give each
	// counted run its GPU figures; nil: no GPU figures.
	GPUSampler *component.ID
}

// Connectors maps connector component ids to their shared state: the
// collector creates one instance per signal (traces -> metrics, logs ->
// metrics), and both must share the run memory so that a run seen as a span
// and as log records is counted once. It belongs to one factory, so nothing
// is shared between factories or tests.
type Connectors struct {
	mu   sync.Mutex
	byID map[component.ID]*Connector
}

// NewConnectors returns an empty registry of connector states.
func NewConnectors() *Connectors {
	return &Connectors{byID: map[component.ID]*Connector{}}
}

// Connector is the state of one connector component id.
type Connector struct {
	id       component.ID
	apiSpans bool
	emitter  *emitter
	stateCfg StateConfig
	state    *derivationState
	// gpuSampler: the extension to look up at start, if any.
	gpuSampler *component.ID

	mu      sync.Mutex
	refs    int // instances created and not shut down
	started bool
	release func()
}

// Get returns the state of set.ID, creating it from newSpec on first use.
func (s *Connectors) Get(set connector.Settings, newSpec func() (*ConnectorSpec, error), next consumer.Metrics) (*Connector, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.byID[set.ID]; ok {
		c.mu.Lock()
		c.refs++
		c.mu.Unlock()
		return c, nil
	}
	spec, err := newSpec()
	if err != nil {
		return nil, err
	}
	cfg := &jobSettings{OutputConfig: spec.Output, JobConfig: spec.Jobs, State: spec.State}
	d := newConnectorDeriver(cfg, time.Now())
	d.scopeName = spec.ScopeName
	e := newEmitter(set.TelemetrySettings, spec.Telemetry, d, spec.Output.MetricsFlushInterval, next)
	c := &Connector{id: set.ID, apiSpans: spec.Jobs.APIRequestsFromSpans, emitter: e, stateCfg: spec.State, gpuSampler: spec.GPUSampler, refs: 1}
	c.release = func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.byID[set.ID] == c {
			delete(s.byID, set.ID)
		}
	}
	s.byID[set.ID] = c
	return c, nil
}

// APIRequestsFromSpans lists the connectors of this registry that derive
// api.requests from SERVER spans, sorted.
func (s *Connectors) APIRequestsFromSpans() []component.ID {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []component.ID
	for id, c := range s.byID {
		if c.apiSpans {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b component.ID) int {
		switch {
		case a.String() < b.String():
			return -1
		case a.String() > b.String():
			return 1
		}
		return 0
	})
	return ids
}

func (c *Connector) start(ctx context.Context, host component.Host) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return nil
	}
	if c.gpuSampler != nil {
		s, err := lookupGPUSampler(host, *c.gpuSampler)
		if err != nil {
			return err
		}
		c.emitter.mu.Lock()
		c.emitter.d.setGPUSampler(s)
		c.emitter.mu.Unlock()
	}
	if c.stateCfg.Storage != nil {
		e := c.emitter
		e.mu.Lock()
		st, err := openState(ctx, host, c.id, component.KindConnector, c.stateCfg, e.d, e.now(), e.logger)
		stats := e.d.takeStats()
		e.mu.Unlock()
		e.report(ctx, &stats)
		if err != nil {
			return err
		}
		c.state = st
	} else {
		warnInMemory(c.emitter.logger, "a restart forgets which runs were counted (a run whose records arrive again is counted again) and loses the counts not yet emitted")
	}
	c.started = true
	c.emitter.start()
	return nil
}

// shutdown flushes and stops when the last instance shuts down.
func (c *Connector) shutdown(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refs--
	if c.refs != 0 {
		return nil // another instance still runs, or this one was shut down already
	}
	c.release()
	if !c.started {
		return nil
	}
	err := c.emitter.shutdown(ctx)
	if c.state != nil {
		err = errors.Join(err, c.state.close(ctx))
	}
	return err
}

// Traces returns an instance handed to the collector for traces -> metrics.
func (c *Connector) Traces() connector.Traces { return &tracesConnector{signalConnector{shared: c}} }

// Logs returns an instance handed to the collector for logs -> metrics.
func (c *Connector) Logs() connector.Logs { return &logsConnector{signalConnector{shared: c}} }

// signalConnector is one instance handed to the collector.
type signalConnector struct {
	shared *Connector
}

func (s *signalConnector) Start(ctx context.Context, host component.Host) error {
	return s.shared.start(ctx, host)
}

func (s *signalConnector) Shutdown(ctx context.Context) error {
	return s.shared.shutdown(ctx)
}

func (*signalConnector) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: false}
}

type tracesConnector struct{ signalConnector }

// ConsumeTraces derives metrics from spans. Malformed spans are skipped and
// counted; the batch never fails.
func (t *tracesConnector) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	t.shared.emitter.update(ctx, func(d *deriver, now time.Time) { d.consumeTraces(td, now) })
	return nil
}

type logsConnector struct{ signalConnector }

// ConsumeLogs derives job runs from status log records.
func (l *logsConnector) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	l.shared.emitter.update(ctx, func(d *deriver, now time.Time) { d.consumeLogs(ld, now) })
	return nil
}

var (
	_ connector.Traces = (*tracesConnector)(nil)
	_ connector.Logs   = (*logsConnector)(nil)
)
