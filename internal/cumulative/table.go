// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

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
//     known and within Config.MaxAge (it is the delta since that start),
//     otherwise it is the baseline;
//   - a point beyond Config.FutureTolerance ahead of now is refused and
//     leaves the series as it was;
//   - a new start time, or a value/bucket falling, is a reset: the point is
//     sent as it is (the delta since the reset), never as a negative delta;
//   - the same point delivered twice gives the same delta twice (Convert;
//     Count gives nothing the second time);
//   - an older point than the last one is dropped (the last delta covers it).
//
// The state is bounded by a TTL and a series count, never a new series
// refused. At the count, a segmented LRU picks what to forget: a series
// seen once waits on probation and goes first, least recently seen first;
// a series updated since (established) is forgotten only when probation is
// empty or the series has been idle longer than a third of the TTL. So a
// flood of new series (one interval of more new series than the cap)
// churns through probation and leaves established neighbours alone. A series that comes back after being forgotten cannot be
// told from a new one by its start time alone, so first points whose start
// time is not after the newest forgotten point (the watermark) are baselines:
// at worst one interval is not sent, never the whole total twice.
//
// With a storage client (Attach) the state also survives a
// restart: see storage.go and format.go.
type Tracker struct {
	cfg    Config
	logger *zap.Logger

	mu sync.Mutex
	// index finds a series' record in slots by its 64-bit key; records are
	// fixed-size and hold no strings, freed slots are reused.
	index map[uint64]int32
	slots []series
	free  []int32
	// probation holds series seen once, established series updated since;
	// each is an LRU list, most recently seen first.
	probation, established lruList
	watermark              pcommon.Timestamp
	// warned rate-limits warnings by metric name and kind of warning.
	warned warnLimiter

	// store is nil when the state lives in memory only.
	store *stateStore

	// scratch is the histogram part of the point being converted, and
	// scratchExponential an exponential histogram's.
	scratch            histogramPart
	scratchExponential exponentialPart
	// layouts holds the histogram bounds the series share.
	layouts layouts
	// passed orders the cumulative series Accumulate passes through.
	passed passedSeries
}

// none marks the end of an LRU list.
const none = -1

// lruList is a list of records linked by slot.
type lruList struct {
	newest, oldest int32 // slots, or none
}

func newLRUList() lruList { return lruList{newest: none, oldest: none} }

// series is the state of one cumulative series: a fixed-size record.
type series struct {
	key          uint64
	slot         int32 // its own index in Tracker.slots
	newer, older int32 // LRU neighbours, or none
	established  bool  // in Tracker.established, not on probation
	seen         int64 // Unix nanoseconds when a point of it last arrived
	kind         seriesKind
	hasPrev      bool
	curSent      bool // cur was sent as a first point (delta since its start)
	// unknown: the series was saved but its state could not be read, so
	// its next point is a baseline (it may have been sent before).
	unknown bool
	// saved: the series has an entry in the storage.
	saved bool

	cur, prev snapshot
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
	s := c.lookup(key)
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
		s.cur.copyFrom(p, &c.layouts)
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
	s.seen = now.UnixNano()
	c.touch(s)
	if s.kind != kind && !s.unknown {
		// The metric's type is part of the key, so only a damaged entry
		// restored at Attach (which cannot know the kind to expect) gets
		// here: its points cannot be subtracted from, as if unreadable.
		s.unknown = true
		cv.ReadErrors++
	}

	switch {
	case s.unknown:
		// Saved but unreadable: it may have been sent before, so p is a
		// baseline, as for a forgotten series.
		s.cur.copyFrom(p, &c.layouts)
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
	s.cur.copyFrom(p, &c.layouts)
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

// Undo takes back the conversion of points the queue refused, so that the
// next point's delta covers them again. Baselines are left alone (they were
// not sent), and so is a series that moved on since: the caller must not let
// a later point of a series be converted before an earlier one is accepted
// or undone (the CloudWatch exporter converts and enqueues in one turn).
func (c *Tracker) Undo(records []Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range records {
		s := c.lookup(r.key)
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

// Len is the number of series remembered.
func (c *Tracker) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.index)
}

// lookup is the series of key, or nil. The pointer is valid until the next
// insert.
func (c *Tracker) lookup(key uint64) *series {
	i, ok := c.index[key]
	if !ok {
		return nil
	}
	return &c.slots[i]
}

// insert adds a series seen at seen, as the most recently seen one, in a
// freed record (keeping its histogram buffers) or a new one.
func (c *Tracker) insert(key uint64, seen time.Time, kind seriesKind, cv *Result) *series {
	for len(c.index) >= c.cfg.MaxSeries {
		c.evict(c.victim(seen), cv)
		c.evicted(seen)
	}
	var i int32
	if n := len(c.free); n > 0 {
		i, c.free = c.free[n-1], c.free[:n-1]
	} else {
		i = int32(len(c.slots))
		c.slots = append(c.slots, series{})
	}
	s := &c.slots[i]
	cur, prev := s.cur, s.prev
	*s = series{key: key, slot: i, seen: seen.UnixNano(), kind: kind}
	s.cur.reuse(&cur)
	s.prev.reuse(&prev)
	c.index[key] = i
	c.pushFront(&c.probation, s)
	return s
}

// victim is the series to forget at the cap: an established series idle
// for longer than a third of the TTL, else the least recently seen series
// on probation, else the least recently updated established one.
func (c *Tracker) victim(now time.Time) *series {
	if o := c.established.oldest; o != none && c.cfg.TTL > 0 && c.slots[o].seen < now.Add(-c.cfg.TTL/3).UnixNano() {
		return &c.slots[o]
	}
	if o := c.probation.oldest; o != none {
		return &c.slots[o]
	}
	return &c.slots[c.established.oldest]
}

// expire forgets the series not seen for longer than the TTL.
func (c *Tracker) expire(now time.Time, cv *Result) {
	limit := now.Add(-c.cfg.TTL).UnixNano()
	for _, l := range []*lruList{&c.probation, &c.established} {
		for l.oldest != none && c.slots[l.oldest].seen < limit {
			c.evict(&c.slots[l.oldest], cv)
		}
	}
}

// evict forgets s to stay within the bounds. Its newest point raises the
// watermark: a point of it cannot be told from a new series' any more.
func (c *Tracker) evict(s *series, cv *Result) {
	c.forgetUpTo(s.cur.ts)
	cv.Evictions++
	if c.store != nil && s.saved {
		c.store.deletes = append(c.store.deletes, seriesStorageKey(s.key))
	}
	c.remove(s)
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
	delete(c.index, s.key)
	c.unlink(c.listOf(s), s)
	c.free = append(c.free, s.slot)
}

func (c *Tracker) listOf(s *series) *lruList {
	if s.established {
		return &c.established
	}
	return &c.probation
}

// touch makes s the most recently seen established series.
func (c *Tracker) touch(s *series) {
	if s.established && c.established.newest == s.slot {
		return
	}
	c.unlink(c.listOf(s), s)
	s.established = true
	c.pushFront(&c.established, s)
}

// The LRU lists link records by slot, most recently seen first.

func (c *Tracker) pushFront(l *lruList, s *series) {
	s.older, s.newer = l.newest, none
	if l.newest != none {
		c.slots[l.newest].newer = s.slot
	}
	l.newest = s.slot
	if l.oldest == none {
		l.oldest = s.slot
	}
}

func (c *Tracker) unlink(l *lruList, s *series) {
	if s.newer != none {
		c.slots[s.newer].older = s.older
	} else {
		l.newest = s.older
	}
	if s.older != none {
		c.slots[s.older].newer = s.newer
	} else {
		l.oldest = s.newer
	}
	s.newer, s.older = none, none
}
