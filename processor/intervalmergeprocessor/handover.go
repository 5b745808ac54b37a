// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package intervalmergeprocessor

import (
	"context"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"

	"github.com/gpubuild/otelcol-gpubuild/internal/requestid"
	"github.com/gpubuild/otelcol-gpubuild/processor/intervalmergeprocessor/internal/merge"
	"github.com/gpubuild/otelcol-gpubuild/processor/intervalmergeprocessor/internal/receipts"
	"github.com/gpubuild/otelcol-gpubuild/processor/intervalmergeprocessor/internal/statedir"
)

// flush closes the open interval (when rotate) and hands the closed ones to
// the next consumer, oldest first, until one is refused.
func (p *mergeProcessor) flush(ctx context.Context, rotate bool) {
	p.flushMu.Lock()
	defer p.flushMu.Unlock()
	defer p.updateRefusal()
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
	taken := ""
	if o.seg.Path != "" {
		var err error
		if taken, err = statedir.Take(o.seg.Path); err != nil {
			p.logger.Error("Could not set aside a receipt journal segment that was handed on; a restart would send it again",
				zap.String("segment", o.seg.Path), zap.Error(err))
			taken = ""
		}
	}
	p.mu.Lock()
	p.ids.Expire(p.now())
	snap := p.ids.AppendSnapshot(nil)
	p.mu.Unlock()
	if err := p.dir.WriteIdentities(snap); err != nil {
		p.logger.Error("Could not save the identities of merged requests; a repeat after a restart may be merged twice",
			zap.String("file", p.dir.IdentitiesPath()), zap.Error(err))
	}
	if taken != "" {
		statedir.Remove(taken)
	}
}
