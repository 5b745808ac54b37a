// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package fanoutconnector // import "github.com/gpubuild/otelcol-gpubuild/connector/fanoutconnector"

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/gpubuild/otelcol-gpubuild/connector/fanoutconnector/internal/metadata"
)

// fanout offers every batch to each branch (a pipeline it feeds) in turn.
// A batch every branch refuses is refused upstream, whose retry then sends
// nothing twice; a batch some branch accepted is accepted upstream, and the
// branches that refused it hold it (branch.hold) and get it again.
type fanout struct {
	cfg      *Config
	logger   *zap.Logger
	tel      *metadata.TelemetryBuilder
	branches []*branch

	stop chan struct{}
	wg   sync.WaitGroup
}

func newFanout(set connector.Settings, cfg *Config, router connector.MetricsRouterAndConsumer) (*fanout, error) {
	tel, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	f := &fanout{cfg: cfg, logger: set.Logger, tel: tel, stop: make(chan struct{})}
	for _, id := range router.PipelineIDs() {
		next, err := router.Consumer(id)
		if err != nil {
			return nil, err
		}
		name := attribute.String("pipeline", id.String())
		f.branches = append(f.branches, &branch{
			name: id.String(), next: next, wait: cfg.RetryInterval,
			pipelineAttrs: metric.WithAttributeSet(attribute.NewSet(name)),
			droppedAttrs: [numDropReasons]metric.AddOption{
				droppedPermanently: metric.WithAttributeSet(attribute.NewSet(name, attribute.String("reason", "refused_permanently"))),
				droppedHoldFull:    metric.WithAttributeSet(attribute.NewSet(name, attribute.String("reason", "hold_full"))),
				droppedAtShutdown:  metric.WithAttributeSet(attribute.NewSet(name, attribute.String("reason", "shutdown"))),
			},
		})
	}
	if err := tel.RegisterFanoutPointsHeldCallback(func(_ context.Context, o metric.Int64Observer) error {
		var n int
		for _, b := range f.branches {
			b.mu.Lock()
			n += b.heldPoints
			b.mu.Unlock()
		}
		o.Observe(int64(n))
		return nil
	}); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *fanout) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: false}
}

func (f *fanout) Start(context.Context, component.Host) error {
	f.wg.Add(1)
	go f.retryLoop()
	return nil
}

func (f *fanout) retryLoop() {
	defer f.wg.Done()
	t := time.NewTicker(f.cfg.RetryInterval)
	defer t.Stop()
	for {
		select {
		case <-f.stop:
			return
		case now := <-t.C:
			for _, b := range f.branches {
				b.retryDue(context.Background(), f, now)
			}
		}
	}
}

// ConsumeMetrics offers md to every branch; see fanout.
func (f *fanout) ConsumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	if len(f.branches) == 1 {
		// Nothing else to send twice: a plain pipeline, with its back pressure.
		return f.branches[0].next.ConsumeMetrics(ctx, md)
	}
	errs := make([]error, len(f.branches))
	accepted := false
	for i, b := range f.branches {
		// Each branch may rewrite its batch (a temporality conversion).
		errs[i] = b.offer(ctx, f, clone(md))
		if errs[i] == nil {
			accepted = true
		}
	}
	if !accepted {
		return errors.Join(errs...)
	}
	for i, b := range f.branches {
		if errs[i] != nil && !consumererror.IsPermanent(errs[i]) {
			// The branch may have rewritten its copy before refusing it
			// (a conversion it took back): hold the batch as it came.
			b.hold(ctx, f, clone(md), errs[i])
		}
	}
	return nil
}

func clone(md pmetric.Metrics) pmetric.Metrics {
	c := pmetric.NewMetrics()
	md.CopyTo(c)
	return c
}

// Shutdown offers what is held once more; what is still refused is lost
// for its branch alone, counted and logged.
func (f *fanout) Shutdown(ctx context.Context) error {
	close(f.stop)
	f.wg.Wait()
	for _, b := range f.branches {
		b.drain(ctx, f, true)
	}
	f.tel.Shutdown()
	return nil
}

type dropReason int

const (
	droppedPermanently dropReason = iota
	droppedHoldFull
	droppedAtShutdown
	numDropReasons
)

// branch is one pipeline fed, with what it refused, oldest first.
type branch struct {
	name          string
	next          consumer.Metrics
	pipelineAttrs metric.AddOption
	droppedAttrs  [numDropReasons]metric.AddOption

	mu         sync.Mutex
	held       []pmetric.Metrics
	heldPoints int
	wait       time.Duration // until the next offer of what is held
	retryAt    time.Time
}

// offer hands md to the branch after what it holds; an error means md was
// neither accepted nor held. A permanent refusal is counted here.
func (b *branch) offer(ctx context.Context, f *fanout, md pmetric.Metrics) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.held) > 0 {
		if !b.drainLocked(ctx, f, false) {
			return errHeldBefore
		}
	}
	// Counted first: once offered, md is the pipeline's to change.
	n := md.DataPointCount()
	err := b.next.ConsumeMetrics(ctx, md)
	if consumererror.IsPermanent(err) {
		b.dropLocked(ctx, f, n, droppedPermanently, err)
	}
	return err
}

// errHeldBefore: the branch still refuses what it holds, so md waits behind it.
var errHeldBefore = errors.New("an earlier batch is still held for this pipeline")

// hold keeps md, which another branch accepted, for the next offer.
func (b *branch) hold(ctx context.Context, f *fanout, md pmetric.Metrics, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := md.DataPointCount()
	if b.heldPoints+n > f.cfg.HoldMaxPoints {
		b.dropLocked(ctx, f, n, droppedHoldFull, err)
		return
	}
	if len(b.held) == 0 {
		b.wait = f.cfg.RetryInterval
		b.retryAt = time.Now().Add(b.wait)
		f.logger.Warn("A pipeline refused data the others accepted; holding it for that pipeline alone and offering it again",
			zap.String("pipeline", b.name), zap.Error(err))
	}
	b.held = append(b.held, md)
	b.heldPoints += n
	f.tel.FanoutRefusals.Add(ctx, 1, b.pipelineAttrs)
}

func (b *branch) retryDue(ctx context.Context, f *fanout, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.held) > 0 && !now.Before(b.retryAt) {
		b.drainLocked(ctx, f, false)
	}
}

func (b *branch) drain(ctx context.Context, f *fanout, final bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.drainLocked(ctx, f, final)
}

// drainLocked offers what is held, oldest first, and reports whether it all
// went. A refusal stops it and doubles the wait; at the final drain what is
// refused is dropped.
func (b *branch) drainLocked(ctx context.Context, f *fanout, final bool) bool {
	took := false
	for len(b.held) > 0 {
		md := b.held[0]
		n := md.DataPointCount()
		// A copy: a refusing branch may have rewritten what it was offered.
		err := b.next.ConsumeMetrics(ctx, clone(md))
		if err != nil && !consumererror.IsPermanent(err) {
			if !final {
				// Taking some is progress (a small queue draining): offer
				// again soon; refusing all backs off.
				b.wait = min(2*b.wait, f.cfg.MaxRetryInterval)
				if took {
					b.wait = f.cfg.RetryInterval
				}
				b.retryAt = time.Now().Add(b.wait)
				return false
			}
			b.dropLocked(ctx, f, n, droppedAtShutdown, err)
		} else if err != nil {
			b.dropLocked(ctx, f, n, droppedPermanently, err)
		}
		b.held[0] = pmetric.Metrics{}
		b.held = b.held[1:]
		b.heldPoints -= n
		took = true
	}
	if !final {
		f.logger.Info("A pipeline took what was held for it", zap.String("pipeline", b.name))
	}
	b.held = nil
	return true
}

func (b *branch) dropLocked(ctx context.Context, f *fanout, n int, reason dropReason, err error) {
	f.tel.FanoutPointsDropped.Add(ctx, int64(n), b.droppedAttrs[reason])
	f.logger.Error("Data points lost for one pipeline (the others have them)",
		zap.String("pipeline", b.name), zap.Int("data_points", n),
		zap.String("reason", [...]string{"refused permanently", "hold_max_points reached", "still refused at shutdown"}[reason]),
		zap.Error(err))
}
