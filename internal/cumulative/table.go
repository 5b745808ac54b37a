package cumulative // import "github.com/gpubuild/otelcol-gpubuild/internal/cumulative"

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"
)

// Tracker rewrites cumulative monotonic sums, cumulative histograms and
// summaries into deltas, in place, before the data enters the sending queue.
//
// Converting before the queue, not at send time, is what makes retries exact:
// a retried or replayed request (from memory or from the persistent queue
// after a restart) carries the same deltas as the first attempt, whereas a
// cumulative point translated again would give a zero delta on retry.
//
// Per series (resource + scope + metric + point attributes) it remembers the
// last point and the one before, so that:
//   - the first point of a series is sent as it is when its start time is
//     known (it is the delta since that start), otherwise it is the baseline;
//   - a new start time, or a value/bucket falling, is a reset: the point is
//     sent as it is (the delta since the reset), never as a negative delta;
//   - the same point delivered twice gives the same delta twice;
//   - an older point than the last one is dropped (the last delta covers it).
//
// The state is bounded by a TTL and a series count (least recently seen is
// forgotten first). A series that comes back after being forgotten cannot be
// told from a new one by its start time alone, so first points whose start
// time is not after the newest forgotten point (the watermark) are baselines:
// at worst one interval is not sent, never the whole total twice.
//
// With a storage client (cumulative_state.storage) the state also survives a
// restart: see cumulativestate.go.
type Tracker struct {
	cfg    Config
	logger *zap.Logger

	mu        sync.Mutex
	series    map[uint64]*series
	lru       seriesList
	watermark pcommon.Timestamp
	// warned rate-limits warnings by metric name and kind of warning.
	warned warnLimiter

	// store is nil when the state lives in memory only.
	store *stateStore

	// scratch space for the point being converted
	scratchBounds             []float64
	scratchCounts, scratchNeg []uint64
}

// series is the state of one cumulative series.
type series struct {
	key          uint64
	newer, older *series
	seen         time.Time // when a point of it last arrived
	kind         seriesKind

	cur, prev snapshot
	hasPrev   bool
	curSent   bool // cur was sent as a first point (delta since its start)
	// unknown: the series was saved but its state could not be read, so
	// its next point is a baseline (it may have been sent before).
	unknown bool
	// storeKey is its key in the storage once saved or restored, else "".
	storeKey string
}

// outcome of converting one point.
type outcome uint8

const (
	emitAsIs  outcome = iota // send the point unchanged: it is the delta since its start
	emitDelta                // send the difference from the previous point
	drop
)

// record notes that the point at ts moved series key on.
func (cv *Result) record(key uint64, ts pcommon.Timestamp, out outcome, moved bool) {
	if moved {
		cv.Records = append(cv.Records, Record{key: key, ts: ts, sent: out != drop})
	}
}

// step moves the series to point p and says how p is to be sent, and
// whether the series moved on (its state changed). p's slices may be scratch
// space: the series keeps copies.
func (c *Tracker) step(ctx context.Context, key uint64, p *snapshot, now time.Time, kind seriesKind, cv *Result) (*series, outcome, Reason, bool) {
	s := c.series[key]
	if s == nil && c.store != nil {
		s = c.restore(ctx, key, now, kind, cv)
	}
	if c.cfg.FutureTolerance > 0 && p.ts.AsTime().After(now.Add(c.cfg.FutureTolerance)) {
		// Neither a baseline nor a last value: the series goes on with its
		// next good point as if this one never came.
		return s, drop, ReasonFuture, false
	}
	if s == nil {
		s = c.insert(key, now, kind, cv)
		s.cur.copyFrom(p)
		s.curSent = p.start != 0 && p.start <= p.ts && p.start > c.watermark
		if s.curSent && c.cfg.MaxAge > 0 && p.start.AsTime().Before(now.Add(-c.cfg.MaxAge)) {
			// Counting a long history into one interval would mislead more
			// than starting the series here.
			s.curSent = false
			return s, drop, ReasonStartTooOld, true
		}
		if s.curSent {
			return s, emitAsIs, 0, true
		}
		return s, drop, ReasonBaseline, true
	}
	s.seen = now
	c.lru.moveToFront(s)

	switch {
	case s.unknown:
		// Saved but unreadable: it may have been sent before, so p is a
		// baseline, as for a forgotten series.
		s.cur.copyFrom(p)
		s.kind, s.unknown, s.hasPrev, s.curSent = kind, false, false, false
		return s, drop, ReasonBaseline, true
	case p.ts == s.cur.ts && p.start == s.cur.start:
		// The same point again (a client re-sent it): the same answer again.
		if s.hasPrev {
			out, reason := c.compare(p, &s.prev, kind)
			return s, out, reason, false
		}
		if s.curSent {
			return s, emitAsIs, 0, false
		}
		return s, drop, ReasonDuplicate, false
	case p.ts <= s.cur.ts:
		return s, drop, ReasonOutOfOrder, false
	}

	// p is newer: it becomes cur (in prev's old buffers), cur becomes prev.
	s.prev, s.cur = s.cur, s.prev
	s.cur.copyFrom(p)
	s.hasPrev, s.curSent = true, false
	out, reason := c.compare(p, &s.prev, kind)
	if out == drop {
		s.hasPrev = false // p is the new baseline
	}
	return s, out, reason, true
}

func (c *Tracker) compare(p, prev *snapshot, kind seriesKind) (outcome, Reason) {
	switch {
	case p.start != 0 && p.start != prev.start:
		return emitAsIs, 0 // restarted: p is the delta since its new start
	case kind.layoutChanged(p, prev):
		return drop, ReasonBucketLayoutChanged
	case kind.fell(p, prev):
		return emitAsIs, 0 // reset without a new start time: p counts since the reset
	}
	return emitDelta, 0
}

// undo takes back the conversion of points the queue refused, so that the
// next point's delta covers them again. A series that moved on since is left
// alone, and so are baselines: they were not sent.
func (c *Tracker) Undo(records []Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range records {
		s := c.series[r.key]
		if !r.sent || s == nil || s.cur.ts != r.ts {
			continue
		}
		if !s.hasPrev {
			// A first point: forget the series so that it is first again.
			c.remove(s)
			continue
		}
		s.cur, s.prev = s.prev, s.cur
		s.hasPrev, s.curSent = false, false
	}
}

// seriesCount is the number of series remembered.
func (c *Tracker) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.series)
}

// insert adds a series seen at seen, as the most recently seen one.
func (c *Tracker) insert(key uint64, seen time.Time, kind seriesKind, cv *Result) *series {
	for len(c.series) >= c.cfg.MaxSeries {
		c.evict(c.lru.oldest, cv)
		c.evicted(seen)
	}
	s := &series{key: key, seen: seen, kind: kind}
	c.series[key] = s
	c.lru.pushFront(s)
	return s
}

// expire forgets the series not seen for longer than the TTL.
func (c *Tracker) expire(now time.Time, cv *Result) {
	limit := now.Add(-c.cfg.TTL)
	for s := c.lru.oldest; s != nil && s.seen.Before(limit); s = c.lru.oldest {
		c.evict(s, cv)
	}
}

// evict forgets s to stay within the bounds. Its newest point raises the
// watermark: a point of it cannot be told from a new series' any more.
func (c *Tracker) evict(s *series, cv *Result) {
	c.forgetUpTo(s.cur.ts)
	cv.Evictions++
	c.remove(s)
	if c.store != nil && s.storeKey != "" {
		c.store.deletes = append(c.store.deletes, s.storeKey)
	}
}

// forgetUpTo raises the watermark to ts.
func (c *Tracker) forgetUpTo(ts pcommon.Timestamp) {
	if ts > c.watermark {
		c.watermark = ts
		if c.store != nil {
			c.store.watermarkChanged = true
		}
	}
}

func (c *Tracker) remove(s *series) {
	delete(c.series, s.key)
	c.lru.unlink(s)
}

// seriesList is an intrusive doubly linked list, most recently seen first.
type seriesList struct {
	newest, oldest *series
}

func (l *seriesList) pushFront(s *series) {
	s.older, s.newer = l.newest, nil
	if l.newest != nil {
		l.newest.newer = s
	}
	l.newest = s
	if l.oldest == nil {
		l.oldest = s
	}
}

func (l *seriesList) unlink(s *series) {
	if s.newer != nil {
		s.newer.older = s.older
	} else {
		l.newest = s.older
	}
	if s.older != nil {
		s.older.newer = s.newer
	} else {
		l.oldest = s.newer
	}
	s.newer, s.older = nil, nil
}

func (l *seriesList) moveToFront(s *series) {
	if l.newest == s {
		return
	}
	l.unlink(s)
	l.pushFront(s)
}
