package buildjobprocessor // import "github.com/gpubuild/otelcol-gpubuild/processor/buildjobprocessor"

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/gpubuild/otelcol-gpubuild/processor/buildjobprocessor/internal/metadata"
)

// emitter owns a deriver: it serializes access to it, reports its stats as
// the component's own telemetry, and emits the derived metrics every
// metrics_flush_interval and at shutdown.
type emitter struct {
	logger    *zap.Logger
	telemetry *metadata.TelemetryBuilder
	next      consumer.Metrics
	interval  time.Duration
	now       func() time.Time

	mu sync.Mutex
	d  *deriver

	skippedAttrs [numSkipReasons]metric.AddOption
	evictedAttrs [2]metric.AddOption

	stopLoop context.CancelFunc
	loopDone chan struct{}
}

func newEmitter(set component.TelemetrySettings, d *deriver, interval time.Duration, next consumer.Metrics) (*emitter, error) {
	tb, err := metadata.NewTelemetryBuilder(set)
	if err != nil {
		return nil, err
	}
	e := &emitter{logger: set.Logger, telemetry: tb, next: next, interval: interval, now: time.Now, d: d}
	for r := range numSkipReasons {
		e.skippedAttrs[r] = metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", r.String())))
	}
	e.evictedAttrs[evictedActive] = metric.WithAttributeSet(attribute.NewSet(attribute.String("state", "active")))
	e.evictedAttrs[evictedEnded] = metric.WithAttributeSet(attribute.NewSet(attribute.String("state", "ended")))
	return e, nil
}

// start begins the flush loop.
func (e *emitter) start() {
	e.mu.Lock()
	e.d.setStart(e.now())
	e.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	e.stopLoop, e.loopDone = cancel, make(chan struct{})
	go e.loop(ctx)
}

func (e *emitter) loop(ctx context.Context) {
	defer close(e.loopDone)
	ticker := time.NewTicker(e.interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			if err := e.flush(ctx, false); err != nil {
				e.logger.Warn("Failed to emit derived metrics", zap.Error(err))
			}
		}
	}
}

// shutdown stops the loop and emits what was derived since the last flush,
// including ends still waiting for their start.
func (e *emitter) shutdown(ctx context.Context) error {
	if e.stopLoop != nil {
		e.stopLoop()
		<-e.loopDone
		e.stopLoop = nil
	}
	err := e.flush(ctx, true)
	e.telemetry.Shutdown()
	return err
}

// update runs f on the deriver under the lock.
func (e *emitter) update(ctx context.Context, f func(d *deriver, now time.Time)) {
	e.mu.Lock()
	f(e.d, e.now())
	stats := e.d.stats
	e.d.stats = derivationStats{}
	e.mu.Unlock()
	e.report(ctx, &stats)
}

func (e *emitter) flush(ctx context.Context, final bool) error {
	e.mu.Lock()
	md := e.d.flush(e.now(), final)
	stats := e.d.stats
	e.d.stats = derivationStats{}
	e.mu.Unlock()
	e.report(ctx, &stats)
	if md.DataPointCount() == 0 {
		return nil
	}
	return e.next.ConsumeMetrics(ctx, md)
}

func (e *emitter) report(ctx context.Context, s *derivationStats) {
	for r, n := range s.skipped {
		if n > 0 {
			e.telemetry.BuildjobRecordsSkipped.Add(ctx, n, e.skippedAttrs[r])
		}
	}
	if s.deduplicated > 0 {
		e.telemetry.BuildjobRecordsDeduplicated.Add(ctx, s.deduplicated)
	}
	for st, n := range s.evicted {
		if n > 0 {
			e.telemetry.BuildjobRunsEvicted.Add(ctx, n, e.evictedAttrs[st])
		}
	}
}
