// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package buildjobconnector // import "github.com/gpubuild/otelcol-gpubuild/connector/buildjobconnector"

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/gpubuild/otelcol-gpubuild/internal/buildjob/derive"
	"github.com/gpubuild/otelcol-gpubuild/internal/gpucost"
	"github.com/gpubuild/otelcol-gpubuild/internal/state"
)

// connectors maps connector component ids to their shared state: the
// collector creates one instance per signal (traces -> metrics, logs ->
// metrics), and both must share the run memory so that a run seen as a span
// and as log records is counted once. It belongs to one factory, so nothing
// is shared between factories or tests.
type connectors struct {
	mu   sync.Mutex
	byID map[component.ID]*sharedConnector
}

func newConnectors() *connectors {
	return &connectors{byID: map[component.ID]*sharedConnector{}}
}

// sharedConnector is the state of one connector component id, shared by
// its traces and logs instances.
type sharedConnector struct {
	cfg        *Config
	derivation *derive.Derivation

	mu      sync.Mutex
	refs    int // instances created and not shut down
	started bool
	release func()
}

// get returns the state of set.ID, creating it on first use.
func (s *connectors) get(set connector.Settings, cfg *Config, newSpec func() (derive.JobSpec, error), next consumer.Metrics) (*sharedConnector, error) {
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
	d, err := derive.NewJobDerivation(set.TelemetrySettings, set.ID, spec, next)
	if err != nil {
		return nil, err
	}
	c := &sharedConnector{cfg: cfg, derivation: d, refs: 1}
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

// apiRequestsFromSpans lists the connectors that derive api.requests from
// SERVER spans, sorted.
func (s *connectors) apiRequestsFromSpans() []component.ID {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []component.ID
	for id, c := range s.byID {
		if c.cfg.APIRequestsFromSpans {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b component.ID) int { return strings.Compare(a.String(), b.String()) })
	return ids
}

// start looks up the GPU sampler and opens the state, once for both
// instances.
func (c *sharedConnector) start(ctx context.Context, host component.Host) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return nil
	}
	if id := c.cfg.GPUSampler; id != nil {
		s, err := lookupGPUSampler(host, *id)
		if err != nil {
			return err
		}
		c.derivation.UseGPUSampler(s)
	}
	if c.cfg.State.Storage != nil {
		if err := c.derivation.OpenState(ctx, host, c.cfg.State); err != nil {
			return err
		}
	} else {
		state.WarnInMemory(c.derivation.Logger(), "derivation state", "state",
			"a restart forgets which runs were counted (a run whose records arrive again is counted again) and loses the counts not yet emitted")
	}
	c.started = true
	c.derivation.Start()
	return nil
}

// shutdown flushes and stops when the last instance shuts down.
func (c *sharedConnector) shutdown(ctx context.Context) error {
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
	return c.derivation.Shutdown(ctx)
}

// lookupGPUSampler finds the gpu_sampler extension among the host's.
func lookupGPUSampler(host component.Host, id component.ID) (gpucost.Sampler, error) {
	ext, ok := host.GetExtensions()[id]
	if !ok {
		return nil, fmt.Errorf("gpu_sampler: no extension %q is configured and enabled in service::extensions", id)
	}
	s, ok := ext.(gpucost.Sampler)
	if !ok {
		return nil, fmt.Errorf("gpu_sampler: extension %q is not an nvml_sampler", id)
	}
	return s, nil
}

// signalConnector is one instance handed to the collector.
type signalConnector struct {
	shared *sharedConnector
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
	t.shared.derivation.ConsumeTraces(ctx, td)
	return nil
}

type logsConnector struct{ signalConnector }

// ConsumeLogs derives job runs from status log records.
func (l *logsConnector) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	l.shared.derivation.ConsumeLogs(ctx, ld)
	return nil
}

var (
	_ connector.Traces = (*tracesConnector)(nil)
	_ connector.Logs   = (*logsConnector)(nil)
)
