// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package intervalmergeprocessor // import "github.com/gpubuild/otelcol-gpubuild/processor/intervalmergeprocessor"

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/gpubuild/otelcol-gpubuild/internal/requestid"
	"github.com/gpubuild/otelcol-gpubuild/internal/state"
	"github.com/gpubuild/otelcol-gpubuild/internal/state/journal"
	"github.com/gpubuild/otelcol-gpubuild/processor/intervalmergeprocessor/internal/identities"
	"github.com/gpubuild/otelcol-gpubuild/processor/intervalmergeprocessor/internal/merge"
	"github.com/gpubuild/otelcol-gpubuild/processor/intervalmergeprocessor/internal/metadata"
	"github.com/gpubuild/otelcol-gpubuild/processor/intervalmergeprocessor/internal/receipts"
	"github.com/gpubuild/otelcol-gpubuild/processor/intervalmergeprocessor/internal/statedir"
)

var errShutdown = errors.New("intervalmerge: shutting down")

// Retry pacing of an interval the next consumer refused.
const (
	retryMin = time.Second
	retryMax = 30 * time.Second
)

// interval is the open interval, or a closed one not yet handed on.
type interval struct {
	iv     *merge.Interval // nil: read it back from seg
	opened time.Time
	closed time.Time
	seg    receipts.Segment
	// Without a journal, the requests waiting for the interval learn the
	// next consumer's answer when done is closed.
	done chan struct{}
	err  error
}

// mergeProcessor merges requests into intervals. With a journal it writes
// each request to disk and acknowledges it at once; a closed interval's
// segment is removed once the next consumer (the exporter's persistent
// queue) took the interval. Without one, it holds each request until its
// interval was taken.
type mergeProcessor struct {
	cfg    *Config
	id     component.ID
	next   consumer.Metrics
	logger *zap.Logger
	tel    *metadata.TelemetryBuilder
	opts   merge.Options
	now    func() time.Time

	mu      sync.Mutex
	cur     *interval
	pending []*interval // closed, in the journal, refused by the next consumer so far
	ids     *identities.Set
	journal *receipts.Journal
	// pendingBytes: the journal segments of pending.
	pendingBytes int64
	// writeFailure is the journal's last failed write (a full disk), until
	// a write or a probe succeeds: the processor refuses, and says so.
	writeFailure error
	stopped      bool
	held         atomic.Int64 // without a journal: ConsumeMetrics calls waiting
	// warned: workers whose out-of-range points were logged this interval.
	warned map[string]bool

	// dir is the state directory (nil without state.journal.directory).
	dir     *statedir.Dir
	marsh   pmetric.ProtoMarshaler
	unmarsh pmetric.ProtoUnmarshaler

	// status: whether new requests are refused, as component status.
	status refusalStatus

	flushMu sync.Mutex    // one hand-over at a time (ticker, early flush, shutdown)
	kick    chan struct{} // the open interval is full: hand it on now
	refused chan struct{} // a hand-over was refused: offer it again later
	stop    chan struct{}
	wg      sync.WaitGroup
}

func newMergeProcessor(set processor.Settings, cfg *Config, next consumer.Metrics) (*mergeProcessor, error) {
	tel, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	p := &mergeProcessor{
		cfg: cfg, id: set.ID, next: next, logger: set.Logger, tel: tel,
		opts:    merge.Options{DropResourceAttributes: cfg.DropResourceAttributes, KeepPerWorker: cfg.KeepPerWorker},
		now:     time.Now,
		ids:     identities.New(cfg.IdentityTTL),
		warned:  map[string]bool{},
		kick:    make(chan struct{}, 1),
		refused: make(chan struct{}, 1),
		stop:    make(chan struct{}),
	}
	p.cur = p.newInterval(p.now())
	if err := tel.RegisterIntervalmergeRequestsHeldCallback(func(_ context.Context, o metric.Int64Observer) error {
		o.Observe(p.held.Load())
		return nil
	}); err != nil {
		return nil, err
	}
	if err := tel.RegisterIntervalmergePointsHeldCallback(func(_ context.Context, o metric.Int64Observer) error {
		p.mu.Lock()
		defer p.mu.Unlock()
		o.Observe(int64(p.cur.iv.Held()))
		return nil
	}); err != nil {
		return nil, err
	}
	if err := tel.RegisterIntervalmergeIntervalsPendingCallback(func(_ context.Context, o metric.Int64Observer) error {
		p.mu.Lock()
		defer p.mu.Unlock()
		o.Observe(int64(len(p.pending)))
		return nil
	}); err != nil {
		return nil, err
	}
	if err := p.registerStateGauges(); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *mergeProcessor) newInterval(now time.Time) *interval {
	return &interval{iv: merge.New(p.opts), opened: now, done: make(chan struct{})}
}

func (p *mergeProcessor) Capabilities() consumer.Capabilities {
	// The request identity is removed, out-of-range points are dropped.
	return consumer.Capabilities{MutatesData: true}
}

// Start reads back what a previous process left in the journal (every
// request it acknowledged and did not hand on) before the receivers start,
// so a sender's retry of one of them is known as a repeat.
func (p *mergeProcessor) Start(_ context.Context, host component.Host) error {
	p.status.host = host
	if p.cfg.legacyJournalKey {
		state.WarnRenamed(p.logger, legacyJournalKey, "state.journal")
	}
	if dir := p.cfg.State.Journal.Directory; dir != "" {
		d, err := statedir.Open(dir, journal.FileName(component.KindProcessor, p.id, "receipts"),
			journal.FileName(component.KindProcessor, p.id, "identities"), p.cfg.State.Journal.Fsync)
		if err != nil {
			return fmt.Errorf("state.journal.directory: %w", err)
		}
		p.dir = d
		p.loadIdentities()
		j, left, err := receipts.Open(dir, d.Segments(), p.cfg.State.Journal.Fsync)
		if err != nil {
			return fmt.Errorf("state.journal.directory: %w", err)
		}
		p.journal = j
		if err := p.readBack(left); err != nil {
			return err
		}
	} else {
		p.logger.Warn("intervalmerge has no state.journal.directory: each request is acknowledged only once its interval was handed on, so each sender gets at most its exporter's num_consumers requests through per interval, and its identity is remembered in memory only")
	}
	p.wg.Add(1)
	go p.run()
	return nil
}

// loadIdentities reads the identities snapshot; a damaged one is set aside
// (requests sent again may then be merged twice, which the log says).
func (p *mergeProcessor) loadIdentities() {
	b, err := p.dir.ReadIdentities()
	if err == nil && b == nil {
		return
	}
	if err == nil {
		err = p.ids.Load(b)
	}
	if err != nil {
		p.dir.SetAsideIdentities()
		p.logger.Error("Set aside the identities of merged requests that could not be read: a request sent again now may be merged twice",
			zap.String("file", p.dir.IdentitiesPath()), zap.Error(err))
	}
}

// readBack turns the segments a previous process left into pending
// intervals and marks their requests as merged.
func (p *mergeProcessor) readBack(left []receipts.Segment) error {
	now := p.now()
	for _, seg := range left {
		requests, discarded, err := receipts.Read(seg.Path, func(id requestid.ID, hasID bool, _ []byte) error {
			if hasID {
				p.ids.Add(id, now)
			}
			return nil
		})
		if errors.Is(err, receipts.ErrUnknownFormat) {
			statedir.SetAsideUnknownFormat(seg.Path)
			p.logger.Error("Set aside a receipt journal segment written by a later version", zap.String("segment", seg.Path))
			continue
		}
		if err != nil {
			return fmt.Errorf("journal.directory: reading %s: %w", seg.Path, err)
		}
		if discarded > 0 {
			p.logger.Warn("Discarded the incomplete last record of a receipt journal segment (a write cut short, never acknowledged)",
				zap.String("segment", seg.Path), zap.Int64("bytes", discarded))
		}
		if requests == 0 {
			statedir.Remove(seg.Path)
			continue
		}
		p.logger.Info("Read back requests acknowledged by the previous process and not yet handed on",
			zap.String("segment", seg.Path), zap.Int("requests", requests))
		p.pending = append(p.pending, &interval{opened: now.Add(-p.cfg.Interval), closed: now, seg: seg})
		p.pendingBytes += seg.Bytes
	}
	return nil
}

func (p *mergeProcessor) run() {
	defer p.wg.Done()
	t := time.NewTicker(p.cfg.Interval)
	defer t.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	armed := false
	backoff := retryMin
	for {
		if p.pendingCount() > 0 {
			// Refused intervals (or those read back at start) are offered
			// again, with backoff.
			if !armed {
				retry.Reset(backoff)
				armed = true
				backoff = min(2*backoff, retryMax)
			}
		} else {
			backoff = retryMin
		}
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.flush(context.Background(), true)
		case <-p.kick:
			p.flush(context.Background(), true)
		case <-p.refused:
		case <-retry.C:
			armed = false
			p.flush(context.Background(), false)
		}
	}
}

func (p *mergeProcessor) pendingCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pending)
}

// ConsumeMetrics takes one request. With a journal: refused points aside,
// a repeat of a merged request is acknowledged and dropped, anything else
// is written to the journal, merged into the open interval and
// acknowledged; a failed write is a retryable refusal. Without one, it
// returns once the interval was handed on, with the next consumer's answer.
func (p *mergeProcessor) ConsumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	id, hasID, idErr := requestid.Take(md)
	if idErr != nil {
		p.logger.Warn("Request merged without the check for repeats: its identity is unusable",
			zap.Error(idErr))
	}
	if !hasID {
		p.tel.IntervalmergeRequestsUnidentified.Add(ctx, 1)
	}
	now := p.now()
	p.refuseOutOfRange(ctx, md, now)
	if md.ResourceMetrics().Len() == 0 {
		return nil
	}
	var body []byte
	if p.journal != nil {
		var err error
		if body, err = p.marsh.MarshalMetrics(md); err != nil {
			return err
		}
	}

	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return errShutdown
	}
	if hasID && p.ids.Seen(id) {
		p.mu.Unlock()
		p.tel.IntervalmergeRequestsDuplicate.Add(ctx, 1)
		return nil
	}
	if err := p.overLimit(); err != nil {
		p.countRefusal(ctx)
		changed := p.status.set(err)
		p.mu.Unlock()
		if changed {
			p.status.report()
		}
		return err
	}
	if p.journal != nil {
		if err := p.journal.Append(id, hasID, body); err != nil {
			p.writeFailure = fmt.Errorf("intervalmerge: the receipt journal cannot be written (a full disk?): %w", err)
			changed := p.status.set(p.refusalCause())
			p.mu.Unlock()
			if changed {
				p.status.report()
			}
			p.tel.IntervalmergeJournalWriteFailures.Add(ctx, 1)
			p.logger.Error("Refused a request (retryable): the receipt journal could not write it", zap.Error(err))
			return fmt.Errorf("intervalmerge: the request was not written, retry later: %w", err)
		}
		if p.writeFailure != nil {
			p.writeFailure = nil
			if p.status.set(p.refusalCause()) {
				defer p.status.report() // after the unlock below
			}
		}
	}
	o := p.cur
	o.iv.Add(md)
	if hasID {
		if p.ids.Add(id, now) {
			p.logger.Warn("Closed the oldest gap of a sidecar's request sequence to stay within the ranges kept per sender",
				zap.String("instance", id.Instance))
		}
	}
	if o.iv.Held() >= p.cfg.MaxPoints {
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
	if p.journal != nil {
		p.mu.Unlock()
		return nil
	}
	p.held.Add(1)
	p.mu.Unlock()
	<-o.done
	p.held.Add(-1)
	return o.err
}

// overLimit refuses new requests while the open interval holds twice
// max_points or the journal holds journal.max_bytes: the senders keep them
// in their own queues until the next consumer takes again.
// refusalCause is why new requests are refused, nil when they are not:
// over a limit, or the journal failing its writes.
func (p *mergeProcessor) refusalCause() error {
	if err := p.overLimit(); err != nil {
		return err
	}
	return p.writeFailure
}

func (p *mergeProcessor) overLimit() error {
	if held := p.cur.iv.Held(); held >= 2*p.cfg.MaxPoints {
		return fmt.Errorf("intervalmerge: the open interval holds %d data points (max_points %d) and cannot be handed on yet: retry later", held, p.cfg.MaxPoints)
	}
	if p.journal != nil {
		if b := p.pendingBytes + p.journal.Bytes(); b >= p.cfg.State.Journal.MaxBytes {
			return fmt.Errorf("intervalmerge: the receipt journal holds %d bytes the next consumer has not taken (state.journal.max_bytes %d): retry later", b, p.cfg.State.Journal.MaxBytes)
		}
	}
	return nil
}

// Shutdown hands on the open interval and what is pending, then refuses new
// data. What the next consumer does not take stays in the journal for the
// next start.
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
	p.flush(ctx, true)
	if p.journal != nil {
		p.mu.Lock()
		err := p.journal.Close()
		p.mu.Unlock()
		if err != nil {
			p.logger.Warn("Closing the receipt journal", zap.Error(err))
		}
	}
	p.tel.Shutdown()
	return nil
}
