// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derive

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/gpubuild/otelcol-gpubuild/internal/buildjob/derivestate"
	"github.com/gpubuild/otelcol-gpubuild/internal/buildjob/gpujoin"
	"github.com/gpubuild/otelcol-gpubuild/internal/cumulative"
)

// emitter owns a deriver: it serializes access to it, keeps its stats as
// the component's own telemetry (telemetry.go), and emits the derived
// metrics every metrics_flush_interval and at shutdown. Its timer is armed
// only for a boundary where a flush has something to do (schedule.go): an
// idle derivation sleeps until a batch gives it work, or until its run
// memory's next deadline.
//
// The derived points exist nowhere else, so a flush the next consumer
// refuses with a retryable error (a full sending queue, memory_limiter) is
// carried over into the next flush instead of being lost. Flushes never
// overlap: the loop flushes, and shutdown flushes once the loop has ended.
type emitter struct {
	logger    *zap.Logger
	telemetry Telemetry
	next      consumer.Metrics
	interval  time.Duration
	now       func() time.Time

	mu sync.Mutex
	d  *deriver
	// counted: the deriver's stats since the start, which the observable
	// counters report. Under mu.
	counted derivationStats

	skippedAttrs      [numSkipReasons]metric.MeasurementOption
	stateSkippedAttrs [derivestate.NumSkipReasons]metric.MeasurementOption
	refusedAttrs      [cumulative.NumReasons]metric.MeasurementOption
	evictedAttrs      [2]metric.MeasurementOption
	gpuSkippedAttrs   [gpujoin.NumAllFigures][gpujoin.NumSkipReasons]metric.MeasurementOption
	carriedAttrs      metric.AddOption
	droppedAttrs      metric.AddOption

	// bounds: the flush boundaries, from start. armedAt: the boundary the
	// loop's timer is armed for (zero: none); wake tells the loop that a
	// batch gave work for an earlier one. Under mu.
	bounds  boundaries
	armedAt time.Time
	wake    chan struct{}

	lastEvictionWarning time.Time
	evictedSinceWarning int64

	stopLoop context.CancelFunc
	loopDone chan struct{}
}

// Retries of a refused final flush, within metrics_flush_interval.
const (
	finalRetryFirst = 50 * time.Millisecond
	finalRetryMax   = time.Second
)

func newEmitter(set component.TelemetrySettings, tel Telemetry, d *deriver, interval time.Duration, next consumer.Metrics) (*emitter, error) {
	e := &emitter{logger: set.Logger, telemetry: tel, next: next, interval: interval, now: time.Now, d: d}
	for r := range numSkipReasons {
		e.skippedAttrs[r] = metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", r.String())))
	}
	for r := range cumulative.NumReasons {
		e.refusedAttrs[r] = metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", r.String())))
	}
	for r := range derivestate.NumSkipReasons {
		e.stateSkippedAttrs[r] = metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", r.String())))
	}
	for f := range gpujoin.NumAllFigures {
		for r := range gpujoin.NumSkipReasons {
			e.gpuSkippedAttrs[f][r] = metric.WithAttributeSet(attribute.NewSet(
				attribute.String("figure", f.String()), attribute.String("reason", r.String())))
		}
	}
	e.evictedAttrs[evictedActive] = metric.WithAttributeSet(attribute.NewSet(attribute.String("state", "active")))
	e.evictedAttrs[evictedEnded] = metric.WithAttributeSet(attribute.NewSet(attribute.String("state", "ended")))
	e.carriedAttrs = metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", "carried_over")))
	e.droppedAttrs = metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", "dropped")))
	if err := e.registerCounters(); err != nil {
		return nil, err
	}
	return e, nil
}

// start begins the flush loop.
func (e *emitter) start() {
	e.mu.Lock()
	now := e.now()
	e.d.setStart(now)
	e.bounds = boundaries{origin: now, interval: e.interval}
	e.wake = make(chan struct{}, 1)
	e.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	e.stopLoop, e.loopDone = cancel, make(chan struct{})
	go e.loop(ctx)
}

func (e *emitter) loop(ctx context.Context) {
	defer close(e.loopDone)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	last := e.bounds.origin
	for {
		at, wait, armed := e.arm(last)
		var fire <-chan time.Time
		if armed {
			timer.Reset(wait)
			fire = timer.C
		}
		select {
		case <-ctx.Done():
			return
		case <-e.wake: // a batch gave work for an earlier boundary
			timer.Stop()
		case <-fire:
			e.mu.Lock()
			e.d.skipTo(at.Add(-e.interval))
			e.mu.Unlock()
			last = at
			// A flush blocked on the next consumer (a sending queue that
			// blocks on overflow) is cancelled by shutdown and carried
			// over into the final flush.
			_ = e.flush(ctx)
		}
	}
}

// arm returns the boundary of the next flush after last and how long
// until it (on the emitter's clock), or false when no flush has anything
// to do until a batch comes.
func (e *emitter) arm(last time.Time) (time.Time, time.Duration, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	due, ok := e.d.flushDue()
	if !ok {
		e.armedAt = time.Time{}
		return time.Time{}, 0, false
	}
	now := e.now()
	e.armedAt = e.bounds.next(due, now, last)
	return e.armedAt, e.armedAt.Sub(now), true
}

// shutdown stops the loop and emits what was derived since the last flush,
// including ends still waiting for their start.
func (e *emitter) shutdown(ctx context.Context) error {
	if e.stopLoop != nil {
		e.stopLoop()
		<-e.loopDone
		e.stopLoop = nil
	}
	err := e.finalFlush(ctx)
	e.release()
	return err
}

// release gives up the emitter's own telemetry (its counters' callbacks).
func (e *emitter) release() {
	if e.telemetry.Shutdown != nil {
		e.telemetry.Shutdown()
	}
}

// update runs f on the deriver under the lock and, when the state is
// persisted, writes what f changed before returning: the request that
// carried the input is acknowledged only once its counts are on disk.
func (e *emitter) update(ctx context.Context, f func(d *deriver, now time.Time)) {
	e.mu.Lock()
	now := e.now()
	// asleep: the loop's timer is not armed for the next boundary, so the
	// boundaries since the last flush passed without one.
	asleep := e.wake != nil && (e.armedAt.IsZero() || e.armedAt.After(e.bounds.ceil(now)))
	if asleep {
		e.d.skipTo(e.bounds.floor(now))
	}
	f(e.d, now)
	if e.d.state != nil {
		if err := e.d.state.persist(ctx, e.d); err != nil {
			e.logger.Warn("Failed to persist the derivation state; the counts are kept in memory and written with the next batch",
				zap.String("storage", e.d.state.store.Location()), zap.Error(err))
		}
	}
	if asleep && e.d.flushNow() {
		e.armedAt = e.bounds.ceil(now)
		select {
		case e.wake <- struct{}{}:
		default:
		}
	}
	evicted := e.tally()
	e.mu.Unlock()
	e.warnEvicted(evicted)
}

// flush emits what was derived since the last accepted flush. A retryable
// refusal carries it over into the next flush; a permanent one drops it.
func (e *emitter) flush(ctx context.Context) error {
	f := e.take(ctx, false)
	if f == nil {
		return nil
	}
	err := e.next.ConsumeMetrics(ctx, f.md)
	switch {
	case err == nil:
		e.handedOver(ctx, f)
	case consumererror.IsPermanent(err):
		e.handedOver(ctx, f)
		e.drop(ctx, f)
		e.logger.Error("Dropped derived metrics: the next consumer refused them with a permanent error",
			zap.Error(err), zap.Int("series", f.series), zap.Int("data_points", f.points))
	default:
		e.carryOver(ctx, f)
		e.logger.Warn("Failed to emit derived metrics; carrying them over to the next flush",
			zap.Error(err), zap.Int("series", f.series), zap.Time("since", f.start.AsTime()))
	}
	return err
}

// finalFlush emits everything at shutdown. A retryable refusal is retried
// for at most metrics_flush_interval (or until ctx ends), so that a sending
// queue that stays full cannot block the shutdown; what is then still
// refused is lost, logged and counted.
func (e *emitter) finalFlush(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, e.interval)
	defer cancel()
	wait := finalRetryFirst
	for {
		f := e.take(ctx, true)
		if f == nil {
			return nil
		}
		err := e.next.ConsumeMetrics(ctx, f.md)
		if err == nil {
			e.handedOver(ctx, f)
			return nil
		}
		if !consumererror.IsPermanent(err) && sleep(ctx, wait) {
			e.carryOver(ctx, f)
			wait = min(2*wait, finalRetryMax)
			continue
		}
		if e.d.state != nil && !consumererror.IsPermanent(err) {
			// Their entries stay in the state: the next start emits them.
			e.telemetry.FlushesFailed.Add(ctx, 1, e.carriedAttrs)
			e.logger.Warn("The final flush at shutdown was refused; the derived metrics stay in the persisted state for the next start",
				zap.Error(err), zap.Int("series", f.series), zap.String("storage", e.d.state.store.Location()))
			return err
		}
		e.handedOver(ctx, f)
		e.drop(ctx, f)
		e.logger.Error("Derived metrics lost: the final flush at shutdown was refused",
			zap.Error(err), zap.Int("series", f.series), zap.Int("data_points", f.points), zap.Time("since", f.start.AsTime()))
		return err
	}
}

// take takes a flush from the deriver; nil when there is nothing to emit.
func (e *emitter) take(ctx context.Context, final bool) *flushed {
	e.mu.Lock()
	f := e.d.takeFlush(e.now(), final)
	evicted := e.tally()
	e.mu.Unlock()
	e.warnEvicted(evicted)
	if f.points == 0 {
		return nil
	}
	return f
}

// handedOver deletes the persisted entries of what the next consumer
// accepted (or refused for good).
func (e *emitter) handedOver(ctx context.Context, f *flushed) {
	if e.d.state == nil || len(f.taken) == 0 {
		return
	}
	e.mu.Lock()
	err := e.d.state.accepted(ctx, f.taken)
	if err != nil {
		e.d.stats.stateWriteFailures++
	}
	e.mu.Unlock()
	if err != nil {
		e.logger.Error("Failed to delete the persisted entries of accepted derived metrics: a restart before they expire would emit them again",
			zap.String("storage", e.d.state.store.Location()), zap.Error(err))
	}
}

func (e *emitter) carryOver(ctx context.Context, f *flushed) {
	e.mu.Lock()
	e.d.carryOver(f)
	e.mu.Unlock()
	e.telemetry.FlushesFailed.Add(ctx, 1, e.carriedAttrs)
}

func (e *emitter) drop(ctx context.Context, f *flushed) {
	e.telemetry.FlushesFailed.Add(ctx, 1, e.droppedAttrs)
	e.telemetry.PointsDropped.Add(ctx, int64(f.points))
}

// evictionWarningEvery rate-limits the warning about the byte budget.
const evictionWarningEvery = time.Minute

func (e *emitter) warnEvicted(n int64) {
	if n == 0 {
		return
	}
	e.mu.Lock()
	e.evictedSinceWarning += n
	now := time.Now()
	if now.Sub(e.lastEvictionWarning) < evictionWarningEvery {
		e.mu.Unlock()
		return
	}
	n, e.evictedSinceWarning, e.lastEvictionWarning = e.evictedSinceWarning, 0, now
	e.mu.Unlock()
	e.logger.Warn("The persisted run memory reached state.max_bytes: the oldest counted runs were forgotten (a late record of one of them would count it again)",
		zap.Int64("runs", n))
}

// sleep waits for d; false when ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// tally moves the deriver's stats into the totals the telemetry observes
// and returns the runs the state forgot for its byte budget meanwhile (to
// warn about). e.mu is held.
func (e *emitter) tally() (stateEvicted int64) {
	s := e.d.takeStats()
	e.counted.add(&s)
	return s.stateEvicted
}

// registerCounters registers a callback for each observable counter the
// component defines.
func (e *emitter) registerCounters() error {
	t := e.telemetry
	type counter struct {
		register RegisterCallback
		observe  func(s *derivationStats, o metric.Int64Observer)
	}
	counters := []counter{
		{t.RecordsSkipped, func(s *derivationStats, o metric.Int64Observer) { observeAll(o, s.skipped[:], e.skippedAttrs[:]) }},
		{t.RecordsDeduplicated, func(s *derivationStats, o metric.Int64Observer) { observe(o, s.deduplicated) }},
		{t.RunsEvicted, func(s *derivationStats, o metric.Int64Observer) { observeAll(o, s.evicted[:], e.evictedAttrs[:]) }},
		{t.StateEntriesSkipped, func(s *derivationStats, o metric.Int64Observer) {
			observeAll(o, s.stateSkipped[:], e.stateSkippedAttrs[:])
		}},
		{t.StateRunsEvicted, func(s *derivationStats, o metric.Int64Observer) { observe(o, s.stateEvicted) }},
		{t.StateWriteFailures, func(s *derivationStats, o metric.Int64Observer) { observe(o, s.stateWriteFailures) }},
		{t.CumulativePointsRefused, func(s *derivationStats, o metric.Int64Observer) {
			observeAll(o, s.cumulativeRefused[:], e.refusedAttrs[:])
		}},
		{t.GPUFiguresSkipped, func(s *derivationStats, o metric.Int64Observer) {
			for f := range s.gpuSkipped {
				observeAll(o, s.gpuSkipped[f][:], e.gpuSkippedAttrs[f][:])
			}
		}},
		{t.GPUOverlappingRuns, func(s *derivationStats, o metric.Int64Observer) { observe(o, s.gpuOverlappingRuns) }},
	}
	for _, c := range counters {
		if c.register == nil {
			continue
		}
		err := c.register(func(_ context.Context, o metric.Int64Observer) error {
			e.mu.Lock()
			s, since := e.counted, e.d.peekStats() // since: not tallied yet
			e.mu.Unlock()
			s.add(&since)
			c.observe(&s, o)
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// observe reports n unless it is zero: like a counter never added to, a
// count that never moved has no series.
func observe(o metric.Int64Observer, n int64, opts ...metric.ObserveOption) {
	if n > 0 {
		o.Observe(n, opts...)
	}
}

// observeAll reports each count of ns with the attributes of its index.
func observeAll(o metric.Int64Observer, ns []int64, attrs []metric.MeasurementOption) {
	for i, n := range ns {
		observe(o, n, attrs[i])
	}
}
