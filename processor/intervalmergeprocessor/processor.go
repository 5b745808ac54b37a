// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package intervalmergeprocessor // import "github.com/gpubuild/otelcol-gpubuild/processor/intervalmergeprocessor"

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/gpubuild/otelcol-gpubuild/internal/pmetricutil"
	"github.com/gpubuild/otelcol-gpubuild/internal/requestid"
	"github.com/gpubuild/otelcol-gpubuild/internal/statejournal"
	"github.com/gpubuild/otelcol-gpubuild/processor/intervalmergeprocessor/internal/identities"
	"github.com/gpubuild/otelcol-gpubuild/processor/intervalmergeprocessor/internal/merge"
	"github.com/gpubuild/otelcol-gpubuild/processor/intervalmergeprocessor/internal/metadata"
	"github.com/gpubuild/otelcol-gpubuild/processor/intervalmergeprocessor/internal/receipts"
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
	stopped      bool
	held         atomic.Int64 // without a journal: ConsumeMetrics calls waiting
	// warned: workers whose out-of-range points were logged this interval.
	warned map[string]bool

	idsPath string
	prefix  string
	marsh   pmetric.ProtoMarshaler
	unmarsh pmetric.ProtoUnmarshaler

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
func (p *mergeProcessor) Start(_ context.Context, _ component.Host) error {
	if dir := p.cfg.Journal.Directory; dir != "" {
		p.prefix = statejournal.FileName(component.KindProcessor, p.id, "receipts")
		p.idsPath = statejournal.FileName(component.KindProcessor, p.id, "identities")
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return fmt.Errorf("journal.directory: %w", err)
		}
		p.idsPath = filepath.Join(dir, p.idsPath)
		p.loadIdentities()
		if taken, err := filepath.Glob(filepath.Join(dir, p.prefix+"_*"+takenSuffix)); err == nil {
			for _, f := range taken {
				_ = os.Remove(f)
			}
		}
		j, left, err := receipts.Open(dir, p.prefix, p.cfg.Journal.Fsync)
		if err != nil {
			return fmt.Errorf("journal.directory: %w", err)
		}
		p.journal = j
		if err := p.readBack(left); err != nil {
			return err
		}
	} else {
		p.logger.Warn("intervalmerge has no journal.directory: each request is acknowledged only once its interval was handed on, so each sender gets at most its exporter's num_consumers requests through per interval, and its identity is remembered in memory only")
	}
	p.wg.Add(1)
	go p.run()
	return nil
}

// loadIdentities reads the identities snapshot; a damaged one is set aside
// (requests sent again may then be merged twice, which the log says).
func (p *mergeProcessor) loadIdentities() {
	b, err := os.ReadFile(p.idsPath)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	if err == nil {
		err = p.ids.Load(b)
	}
	if err != nil {
		_ = os.Rename(p.idsPath, p.idsPath+".damaged")
		p.logger.Error("Set aside the identities of merged requests that could not be read: a request sent again now may be merged twice",
			zap.String("file", p.idsPath), zap.Error(err))
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
			_ = os.Rename(seg.Path, seg.Path+".unknown-format")
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
			_ = os.Remove(seg.Path)
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
		p.mu.Unlock()
		return err
	}
	if p.journal != nil {
		if err := p.journal.Append(id, hasID, body); err != nil {
			p.mu.Unlock()
			p.tel.IntervalmergeJournalWriteFailures.Add(ctx, 1)
			p.logger.Error("Refused a request (retryable): the receipt journal could not write it", zap.Error(err))
			return fmt.Errorf("intervalmerge: the request was not written, retry later: %w", err)
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
func (p *mergeProcessor) overLimit() error {
	if held := p.cur.iv.Held(); held >= 2*p.cfg.MaxPoints {
		return fmt.Errorf("intervalmerge: the open interval holds %d data points (max_points %d) and cannot be handed on yet: retry later", held, p.cfg.MaxPoints)
	}
	if p.journal != nil {
		if b := p.pendingBytes + p.journal.Bytes(); b >= p.cfg.Journal.MaxBytes {
			return fmt.Errorf("intervalmerge: the receipt journal holds %d bytes the next consumer has not taken (journal.max_bytes %d): retry later", b, p.cfg.Journal.MaxBytes)
		}
	}
	return nil
}

// refuseOutOfRange removes the points whose timestamp is outside
// [now-max_age, now+max_ahead], counts them and logs each worker once per
// interval with its resource.
func (p *mergeProcessor) refuseOutOfRange(ctx context.Context, md pmetric.Metrics, now time.Time) {
	hi := pcommon.NewTimestampFromTime(now.Add(p.cfg.MaxAhead))
	lo := pcommon.NewTimestampFromTime(now.Add(-p.cfg.MaxAge))
	bad := func(ts pcommon.Timestamp) bool { return ts > hi || (ts != 0 && ts < lo) }
	md.ResourceMetrics().RemoveIf(func(rm pmetric.ResourceMetrics) bool {
		var refused int
		var example pcommon.Timestamp
		count := func(ts pcommon.Timestamp) bool {
			if bad(ts) {
				refused++
				example = ts
				return true
			}
			return false
		}
		rm.ScopeMetrics().RemoveIf(func(sm pmetric.ScopeMetrics) bool {
			sm.Metrics().RemoveIf(func(m pmetric.Metric) bool {
				switch m.Type() {
				case pmetric.MetricTypeGauge:
					m.Gauge().DataPoints().RemoveIf(func(dp pmetric.NumberDataPoint) bool { return count(dp.Timestamp()) })
				case pmetric.MetricTypeSum:
					m.Sum().DataPoints().RemoveIf(func(dp pmetric.NumberDataPoint) bool { return count(dp.Timestamp()) })
				case pmetric.MetricTypeHistogram:
					m.Histogram().DataPoints().RemoveIf(func(dp pmetric.HistogramDataPoint) bool { return count(dp.Timestamp()) })
				case pmetric.MetricTypeExponentialHistogram:
					m.ExponentialHistogram().DataPoints().RemoveIf(func(dp pmetric.ExponentialHistogramDataPoint) bool { return count(dp.Timestamp()) })
				case pmetric.MetricTypeSummary:
					m.Summary().DataPoints().RemoveIf(func(dp pmetric.SummaryDataPoint) bool { return count(dp.Timestamp()) })
				}
				return refused > 0 && pmetricutil.PointCount(m) == 0
			})
			return sm.Metrics().Len() == 0
		})
		if refused > 0 {
			p.tel.IntervalmergePointsOutOfRange.Add(ctx, int64(refused))
			p.warnOutOfRange(rm.Resource(), refused, example, now)
		}
		return rm.ScopeMetrics().Len() == 0
	})
}

func (p *mergeProcessor) warnOutOfRange(res pcommon.Resource, refused int, example pcommon.Timestamp, now time.Time) {
	worker := fmt.Sprint(res.Attributes().AsRaw())
	p.mu.Lock()
	first := !p.warned[worker]
	p.warned[worker] = true
	p.mu.Unlock()
	if !first {
		return
	}
	p.logger.Warn("Refused data points whose timestamp is too far from the gateway's clock (is this worker's clock wrong?); the worker's other points and every other worker's are taken",
		zap.Any("worker", res.Attributes().AsRaw()), zap.Int("points", refused),
		zap.Time("example_timestamp", example.AsTime()), zap.Time("gateway_time", now),
		zap.Duration("max_ahead", p.cfg.MaxAhead), zap.Duration("max_age", p.cfg.MaxAge))
}

// flush closes the open interval (when rotate) and hands the closed ones to
// the next consumer, oldest first, until one is refused.
func (p *mergeProcessor) flush(ctx context.Context, rotate bool) {
	p.flushMu.Lock()
	defer p.flushMu.Unlock()
	now := p.now()
	if rotate {
		p.mu.Lock()
		if !p.cur.iv.Empty() {
			o := p.cur
			if p.journal != nil {
				seg, ok, err := p.journal.Rotate()
				switch {
				case err != nil:
					// The open interval stays open (its requests are in
					// the open segment); tried again at the next flush.
					p.logger.Error("Could not start a new receipt journal segment; the interval stays open", zap.Error(err))
					o = nil
				case ok:
					o.seg = seg
					p.pendingBytes += seg.Bytes
				}
			}
			if o != nil {
				o.closed = now
				p.pending = append(p.pending, o)
				p.cur = p.newInterval(now)
				clear(p.warned)
			}
		}
		p.mu.Unlock()
	}
	for {
		p.mu.Lock()
		if len(p.pending) == 0 {
			p.mu.Unlock()
			return
		}
		o := p.pending[0]
		p.mu.Unlock()
		if err := p.handOn(ctx, o); err != nil {
			select {
			case p.refused <- struct{}{}:
			default:
			}
			return
		}
		p.mu.Lock()
		p.pending = p.pending[1:]
		p.pendingBytes -= o.seg.Bytes
		p.mu.Unlock()
		if p.journal != nil {
			p.commit(o)
		}
	}
}

// handOn gives one closed interval to the next consumer. Without a journal
// its requests learn the answer; with one, a refused interval stays in the
// journal and is read back for the next attempt.
func (p *mergeProcessor) handOn(ctx context.Context, o *interval) error {
	iv := o.iv
	o.iv = nil // after this attempt, the journal is the interval
	if iv == nil {
		var err error
		if iv, err = p.readSegment(o.seg); err != nil {
			p.logger.Error("Could not read back a receipt journal segment; kept for the next attempt", zap.String("segment", o.seg.Path), zap.Error(err))
			return err
		}
	}
	if iv.Empty() {
		if p.journal == nil {
			close(o.done)
		}
		return nil
	}
	st := iv.Stats()
	md := iv.Close(pcommon.NewTimestampFromTime(o.opened), pcommon.NewTimestampFromTime(o.closed))
	err := p.next.ConsumeMetrics(ctx, md)
	if p.journal == nil {
		// Every request of the interval gets the answer; on a refusal the
		// senders retry, nothing of it was accepted.
		o.err = err
		close(o.done)
	}
	if err != nil {
		p.logger.Warn("The next consumer refused the interval; it is offered again", zap.Int64("points", st.PointsIn), zap.Error(err),
			zap.Bool("kept_in_journal", p.journal != nil))
		if p.journal == nil {
			return nil // the senders retry it
		}
		return err
	}
	p.tel.IntervalmergeFlushes.Add(ctx, 1)
	p.tel.IntervalmergePointsIn.Add(ctx, st.PointsIn)
	p.tel.IntervalmergePointsMerged.Add(ctx, st.PointsMerged)
	if st.Conflicts > 0 {
		p.tel.IntervalmergeConflicts.Add(ctx, st.Conflicts)
		p.logger.Warn("series kept apart: their metric name has another type, unit or bucket layout in this interval",
			zap.Strings("metrics", st.ConflictNames), zap.Int64("points", st.Conflicts))
	}
	return nil
}

func (p *mergeProcessor) readSegment(seg receipts.Segment) (*merge.Interval, error) {
	iv := merge.New(p.opts)
	_, _, err := receipts.Read(seg.Path, func(_ requestid.ID, _ bool, body []byte) error {
		md, err := p.unmarsh.UnmarshalMetrics(body)
		if err != nil {
			return err
		}
		iv.Add(md)
		return nil
	})
	return iv, err
}

// commit records that an interval was taken: its segment is renamed
// aside (one rename, the residual window: a gateway killed between the
// next consumer's answer and the rename sends the interval again at its
// next start), then the identities are saved and the segment removed.
func (p *mergeProcessor) commit(o *interval) {
	taken := o.seg.Path + takenSuffix
	if o.seg.Path != "" {
		if err := os.Rename(o.seg.Path, taken); err != nil {
			p.logger.Error("Could not set aside a receipt journal segment that was handed on; a restart would send it again",
				zap.String("segment", o.seg.Path), zap.Error(err))
			taken = ""
		}
	}
	p.mu.Lock()
	p.ids.Expire(p.now())
	snap := p.ids.AppendSnapshot(nil)
	p.mu.Unlock()
	if err := p.writeIdentities(snap); err != nil {
		p.logger.Error("Could not save the identities of merged requests; a repeat after a restart may be merged twice",
			zap.String("file", p.idsPath), zap.Error(err))
	}
	if taken != "" {
		_ = os.Remove(taken)
	}
}

// takenSuffix marks a segment whose interval was taken; one left by a
// killed process is removed at start, never read.
const takenSuffix = ".taken"

func (p *mergeProcessor) writeIdentities(snap []byte) error {
	tmp := p.idsPath + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(snap)
	if err == nil && p.cfg.Journal.Fsync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, p.idsPath)
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
