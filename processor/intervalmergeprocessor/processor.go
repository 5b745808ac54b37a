// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package intervalmergeprocessor // import "github.com/gpubuild/otelcol-gpubuild/processor/intervalmergeprocessor"

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/gpubuild/otelcol-gpubuild/processor/intervalmergeprocessor/internal/merge"
	"github.com/gpubuild/otelcol-gpubuild/processor/intervalmergeprocessor/internal/metadata"
)

var errShutdown = errors.New("intervalmerge: shutting down")

// open is the interval requests are merged into, and what its waiting
// requests learn when it is handed on.
type open struct {
	iv   *merge.Interval
	done chan struct{}
	err  error
}

// mergeProcessor holds every ConsumeMetrics call until the interval holding
// its data was accepted by the next consumer (the exporter's persistent
// queue), so an acknowledged request is never lost and a request lost with
// the process was never acknowledged: its sender retries it elsewhere.
type mergeProcessor struct {
	cfg    *Config
	next   consumer.Metrics
	logger *zap.Logger
	tel    *metadata.TelemetryBuilder
	opts   merge.Options

	mu      sync.Mutex
	cur     *open
	stopped bool
	held    atomic.Int64 // ConsumeMetrics calls waiting for their flush

	flushMu sync.Mutex // one flush at a time (ticker and shutdown)
	stop    chan struct{}
	wg      sync.WaitGroup
}

func newMergeProcessor(set processor.Settings, cfg *Config, next consumer.Metrics) (*mergeProcessor, error) {
	tel, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	p := &mergeProcessor{
		cfg: cfg, next: next, logger: set.Logger, tel: tel,
		opts: merge.Options{DropResourceAttributes: cfg.DropResourceAttributes, KeepPerWorker: cfg.KeepPerWorker},
		stop: make(chan struct{}),
	}
	p.cur = p.newOpen()
	if err := tel.RegisterIntervalmergeRequestsHeldCallback(func(_ context.Context, o metric.Int64Observer) error {
		o.Observe(p.held.Load())
		return nil
	}); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *mergeProcessor) newOpen() *open {
	return &open{iv: merge.New(p.opts), done: make(chan struct{})}
}

func (p *mergeProcessor) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: false}
}

func (p *mergeProcessor) Start(context.Context, component.Host) error {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(p.cfg.Interval)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.flush(context.Background())
			}
		}
	}()
	return nil
}

// ConsumeMetrics merges md into the open interval and returns when that
// interval was handed on, with the next consumer's answer. It waits even
// when ctx ends first: the data is merged and will be sent, and the
// sender's retry after a cancelled call would count it twice.
func (p *mergeProcessor) ConsumeMetrics(_ context.Context, md pmetric.Metrics) error {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return errShutdown
	}
	o := p.cur
	o.iv.Add(md)
	p.held.Add(1)
	p.mu.Unlock()
	<-o.done
	p.held.Add(-1)
	return o.err
}

// flush hands the open interval on and releases its requests.
func (p *mergeProcessor) flush(ctx context.Context) {
	p.flushMu.Lock()
	defer p.flushMu.Unlock()
	p.mu.Lock()
	o := p.cur
	p.cur = p.newOpen()
	p.mu.Unlock()

	if !o.iv.Empty() {
		st := o.iv.Stats()
		md := o.iv.Metrics()
		o.err = p.next.ConsumeMetrics(ctx, md)
		p.tel.IntervalmergeFlushes.Add(ctx, 1)
		p.tel.IntervalmergePointsIn.Add(ctx, st.PointsIn)
		p.tel.IntervalmergePointsMerged.Add(ctx, st.PointsMerged)
		if st.Conflicts > 0 {
			p.tel.IntervalmergeConflicts.Add(ctx, st.Conflicts)
			p.logger.Warn("series kept apart: their metric name has another type, unit or bucket layout in this interval",
				zap.Strings("metrics", st.ConflictNames), zap.Int64("points", st.Conflicts))
		}
		if o.err != nil {
			// Every request of the interval gets the error; the senders
			// retry, nothing of it was accepted.
			p.logger.Warn("next consumer refused the interval; its requests are refused for their senders to retry",
				zap.Int64("points", st.PointsIn), zap.Error(o.err))
		}
	}
	close(o.done)
}

// Shutdown hands on the open interval, then refuses new data.
func (p *mergeProcessor) Shutdown(ctx context.Context) error {
	p.mu.Lock()
	already := p.stopped
	p.stopped = true
	p.mu.Unlock()
	if already {
		return nil
	}
	close(p.stop)
	p.wg.Wait()
	p.flush(ctx)
	p.tel.Shutdown()
	return nil
}
