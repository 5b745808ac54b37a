package buildjobprocessor // import "github.com/gpubuild/otelcol-gpubuild/processor/buildjobprocessor"

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// jobConnector is the state of one buildjob connector. The collector creates
// one connector instance per signal (traces -> metrics, logs -> metrics); both
// share this value so that a run seen as a span and as log records is
// counted once.
type jobConnector struct {
	emitter *emitter

	mu      sync.Mutex
	refs    int // instances created and not shut down
	started bool
	release func()
}

// sharedConnectors maps component ids to their shared state. It belongs to
// one factory, so nothing is shared between factories or tests.
type sharedConnectors struct {
	mu   sync.Mutex
	byID map[component.ID]*jobConnector
}

func (s *sharedConnectors) get(set connector.Settings, cfg *Config, next consumer.Metrics) (*jobConnector, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.byID[set.ID]; ok {
		c.mu.Lock()
		c.refs++
		c.mu.Unlock()
		return c, nil
	}
	e, err := newEmitter(set.TelemetrySettings, newConnectorDeriver(cfg, time.Now()), cfg.MetricsFlushInterval, next)
	if err != nil {
		return nil, err
	}
	c := &jobConnector{emitter: e, refs: 1}
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

func (c *jobConnector) start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.started {
		c.started = true
		c.emitter.start()
	}
}

// shutdown flushes and stops when the last instance shuts down.
func (c *jobConnector) shutdown(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refs--
	if c.refs != 0 {
		return nil // another instance still runs, or this one was shut down already
	}
	c.release()
	return c.emitter.shutdown(ctx)
}

// signalConnector is one instance handed to the collector.
type signalConnector struct {
	shared *jobConnector
}

func (s *signalConnector) Start(context.Context, component.Host) error {
	s.shared.start()
	return nil
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
