// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derive

import (
	"context"
	"sync"

	"github.com/gpubuild/otelcol-gpubuild/internal/buildjob/derivestate"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// The components own their lifecycle (connector/buildjobconnector,
// processor/buildjobprocessor); the derivation's tests drive a Derivation
// the same way through these: one per connector id shared by its traces
// and logs instances, the state opened at the first Start, the derivation
// shut down with the last instance.

type testConnector struct {
	*Derivation
	cfg *jobSettings

	mu      sync.Mutex
	refs    int
	started bool
}

func (c *testConnector) start(ctx context.Context, host component.Host) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return nil
	}
	if c.cfg.State.Storage != nil {
		if err := c.OpenState(ctx, host, c.cfg.State); err != nil {
			return err
		}
	}
	c.started = true
	c.Start()
	return nil
}

func (c *testConnector) shutdown(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refs--
	if c.refs != 0 || !c.started {
		return nil
	}
	return c.Shutdown(ctx)
}

func (c *testConnector) Traces() connector.Traces { return &tracesConnector{signalConnector{c}} }

type signalConnector struct{ shared *testConnector }

func (s *signalConnector) Start(ctx context.Context, host component.Host) error {
	return s.shared.start(ctx, host)
}

func (s *signalConnector) Shutdown(ctx context.Context) error { return s.shared.shutdown(ctx) }

func (*signalConnector) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

type tracesConnector struct{ signalConnector }

func (t *tracesConnector) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	t.shared.ConsumeTraces(ctx, td)
	return nil
}

type logsConnector struct{ signalConnector }

func (l *logsConnector) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	l.shared.ConsumeLogs(ctx, ld)
	return nil
}

// testConnectorFactory is a connector factory over the derivation,
// configured with *jobSettings, as the connector component builds one.
func testConnectorFactory() connector.Factory {
	var mu sync.Mutex
	byID := map[component.ID]*testConnector{}
	get := func(set connector.Settings, cfg component.Config, next consumer.Metrics) *testConnector {
		mu.Lock()
		defer mu.Unlock()
		if c, ok := byID[set.ID]; ok && c.refs > 0 {
			c.mu.Lock()
			c.refs++
			c.mu.Unlock()
			return c
		}
		c := cfg.(*jobSettings)
		tc := &testConnector{cfg: c, refs: 1, Derivation: must(NewJobDerivation(set.TelemetrySettings, set.ID,
			JobSpec{Output: c.OutputConfig, Jobs: c.JobConfig, ScopeName: "buildjob-test", Telemetry: testTelemetry(set.TelemetrySettings)}, next))}
		byID[set.ID] = tc
		return tc
	}
	return connector.NewFactory(testType,
		func() component.Config { return testConfig() },
		connector.WithTracesToMetrics(func(_ context.Context, set connector.Settings, cfg component.Config, next consumer.Metrics) (connector.Traces, error) {
			return &tracesConnector{signalConnector{get(set, cfg, next)}}, nil
		}, component.StabilityLevelDevelopment),
		connector.WithLogsToMetrics(func(_ context.Context, set connector.Settings, cfg component.Config, next consumer.Metrics) (connector.Logs, error) {
			return &logsConnector{signalConnector{get(set, cfg, next)}}, nil
		}, component.StabilityLevelDevelopment),
	)
}

// testProcessor is the processor component's lifecycle over a Derivation.
type testProcessor struct {
	*Derivation
	stateCfg derivestate.Config
}

func newTestProcessor(set component.TelemetrySettings, spec HTTPSpec, st derivestate.Config, next consumer.Metrics) *testProcessor {
	return &testProcessor{Derivation: must(NewHTTPDerivation(set, component.NewID(testType), spec, next)), stateCfg: st}
}

// must returns d, panicking on err: the test telemetry always registers.
func must(d *Derivation, err error) *Derivation {
	if err != nil {
		panic(err)
	}
	return d
}

func (p *testProcessor) Start(ctx context.Context, host component.Host) error {
	if p.stateCfg.Storage != nil {
		if err := p.OpenState(ctx, host, p.stateCfg); err != nil {
			return err
		}
	}
	p.Derivation.Start()
	return nil
}

func (p *testProcessor) ProcessMetrics(ctx context.Context, md pmetric.Metrics) (pmetric.Metrics, error) {
	p.ConsumeHTTPMetrics(ctx, md)
	return md, nil
}
