// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cumulative // import "github.com/gpubuild/otelcol-gpubuild/internal/cumulative"

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"time"
	"unsafe"

	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// stateStore is the saving side of a Tracker.
type stateStore struct {
	client storage.Client
	// listed: every saved series was loaded at start, so a series that is
	// not in memory has no saved state and needs no Get.
	listed bool

	// Under Tracker.mu: what the next save must do besides setting
	// the series it is given.
	deletes          []string
	watermarkChanged bool

	// saveMu orders saves, so that a save never overwrites a newer state
	// with an older one; sets, ops and ptrs are reused under it.
	saveMu sync.Mutex
	closed bool
	sets   []pendingSet
	ops    []storage.Operation
	ptrs   []*storage.Operation
	// layoutsWritten: the layout entries the save in progress writes.
	layoutsWritten map[uint64]bool
	// valueBytes sizes the next save's buffer.
	valueBytes int
}

// pendingSet is a value to set, in a save's buffer.
type pendingSet struct {
	key        string
	start, end int
}

// Load is what attachStorage found.
type Load struct {
	// Restored series are back in memory; Expired ones were older than the TTL.
	Restored, Expired int
	// ReadErrors counts entries (or a whole listing) that could not be read.
	ReadErrors int64
	// Listed: the whole saved state was read at once (storage.Walker).
	Listed bool
}

// Attach makes c save its state through client and loads what a
// previous process saved. Read errors are counted, never fatal: a series
// whose state cannot be read has its next point taken as a baseline, and an
// unreadable watermark is replaced by now (every series not restored is
// then a baseline rather than possibly counted twice).
func (c *Tracker) Attach(ctx context.Context, client storage.Client, now time.Time) Load {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := &stateStore{client: client, layoutsWritten: map[uint64]bool{}}
	c.store = st
	var load Load
	var cv Result

	nowTS := pcommon.NewTimestampFromTime(now)
	readWatermark := func(value []byte) {
		switch wm, err := decodeWatermark(value); {
		case err != nil:
			load.ReadErrors++
			c.forgetUpTo(nowTS)
		case value == nil:
			st.watermarkChanged = true // written at the first save: it marks the format
		default:
			c.watermark = wm
		}
	}

	if walker, ok := client.(storage.Walker); ok {
		type savedEntry struct {
			key   uint64
			value []byte
		}
		var (
			entries   []*series
			watermark []byte
			// layouts read so far, and those a series entry referred to
			layouts, referred = map[uint64][]float64{}, map[uint64]bool{}
			layoutKeys        []string
			// entries listed before the layout they refer to (a storage
			// need not list its keys in order)
			deferred []savedEntry
		)
		lookup := func(h uint64) ([]float64, bool) {
			b, ok := layouts[h]
			if ok {
				referred[h] = true
			}
			return b, ok
		}
		unreadable := func(key uint64) *series {
			load.ReadErrors++
			return &series{key: key, saved: true, seen: now.UnixNano(), unknown: true}
		}
		err := walker.Walk(ctx, func(key string, value []byte) ([]*storage.Operation, error) {
			if key == WatermarkKey {
				watermark = slices.Clone(value)
				return nil, nil
			}
			if h, ok := parseLayoutKey(key); ok {
				layoutKeys = append(layoutKeys, key)
				if b, err := decodeLayout(value, h); err == nil {
					layouts[h] = b
				} else {
					load.ReadErrors++
				}
				return nil, nil
			}
			hash, ok := parseSeriesKey(key)
			if !ok {
				return nil, nil // not ours to interpret
			}
			s := &series{key: hash, saved: true}
			switch err := decodeSeriesState(value, s, lookup); {
			case errors.Is(err, errNoLayout):
				deferred = append(deferred, savedEntry{hash, slices.Clone(value)})
				return nil, nil
			case err != nil || c.unusable(s, now):
				s = unreadable(hash)
			}
			entries = append(entries, s)
			return nil, nil
		})
		if err == nil {
			for _, d := range deferred {
				s := &series{key: d.key, saved: true}
				if decodeSeriesState(d.value, s, lookup) != nil || c.unusable(s, now) {
					s = unreadable(d.key)
				}
				entries = append(entries, s)
			}
			for _, k := range layoutKeys {
				if h, _ := parseLayoutKey(k); !referred[h] {
					st.deletes = append(st.deletes, k)
				}
			}
			st.listed, load.Listed = true, true
			readWatermark(watermark)
			// Oldest first, so that the LRU list ends in the right order.
			slices.SortFunc(entries, func(a, b *series) int { return cmp.Compare(a.seen, b.seen) })
			for _, e := range entries {
				if c.restoreEntry(e, time.Unix(0, e.seen), now, &cv) != nil {
					load.Restored++
				} else {
					load.Expired++
				}
			}
			load.Expired += int(cv.Evictions)
			return load
		}
		load.ReadErrors++ // fall back to one Get per series
	}
	value, err := client.Get(ctx, WatermarkKey)
	if err != nil {
		load.ReadErrors++
		c.forgetUpTo(nowTS)
	} else {
		readWatermark(value)
	}
	return load
}

// restore reads the saved state of a series that is not in memory. It
// returns nil when there is none (or it expired): the point is then a first
// point, under the watermark rule.
func (c *Tracker) restore(ctx context.Context, key uint64, now time.Time, kind seriesKind, cv *Result) *series {
	if c.store.listed {
		return nil
	}
	storeKey := seriesStorageKey(key)
	value, err := c.store.client.Get(ctx, storeKey)
	if err == nil && value == nil {
		return nil
	}
	lookup := func(h uint64) ([]float64, bool) {
		v, err := c.store.client.Get(ctx, layoutStorageKey(h))
		if err != nil || v == nil {
			return nil, false
		}
		b, err := decodeLayout(v, h)
		return b, err == nil
	}
	e := &series{key: key, saved: true}
	if err != nil || decodeSeriesState(value, e, lookup) != nil || e.kind != kind || c.unusable(e, now) {
		cv.ReadErrors++
		*e = series{key: key, saved: true, kind: kind, unknown: true}
	}
	if e.unknown {
		e.seen = now.UnixNano()
	}
	s := c.restoreEntry(e, now, now, cv)
	if s == nil {
		cv.Evictions++ // forgotten for its age, as in memory
	}
	return s
}

// unusable reports whether a series read from the storage, though it
// decoded, cannot be gone on from: its last point, or when it was last
// seen, is further ahead of now than a point may be (FutureTolerance; a
// damaged entry, or a clock set back since it was saved: every point until
// then would be older than its last and dropped), or it is a sum (always
// monotonic here) below zero or not a number, from which a delta would
// exceed the series' total.
func (c *Tracker) unusable(s *series, now time.Time) bool {
	if c.cfg.FutureTolerance > 0 {
		limit := now.Add(c.cfg.FutureTolerance)
		if s.cur.ts.AsTime().After(limit) || time.Unix(0, s.seen).After(limit) {
			return true
		}
	}
	if s.kind != sumSeries {
		return false
	}
	return negativeSum(&s.cur) || s.hasPrev && negativeSum(&s.prev)
}

func negativeSum(p *snapshot) bool {
	if p.isInt {
		return p.intValue() < 0
	}
	return !(p.value() >= 0) // NaN too
}

// restoreEntry puts a series read from the storage in memory, as seen at
// seen, unless it was last seen longer than the TTL before now: then it is
// forgotten as an eviction would (watermark raised, entry deleted) and
// restoreEntry returns nil.
func (c *Tracker) restoreEntry(e *series, seen, now time.Time, cv *Result) *series {
	if now.Sub(time.Unix(0, e.seen)) > c.cfg.TTL {
		if !e.unknown {
			c.forgetUpTo(e.cur.ts)
		}
		c.store.deletes = append(c.store.deletes, seriesStorageKey(e.key))
		return nil
	}
	s := c.insert(e.key, seen, e.kind, cv)
	s.cur, s.prev, s.hasPrev, s.curSent, s.unknown, s.saved = e.cur, e.prev, e.hasPrev, e.curSent, e.unknown, true
	for _, p := range []*snapshot{&s.cur, &s.prev} {
		if p.histogramPart != nil {
			p.bounds = c.layouts.shared(p.bounds)
		}
	}
	if e.hasPrev {
		c.touch(s) // updated before the restart: established
	}
	return s
}

// Save writes, in one Batch, the state of the series moved by records
// whose conversion stands (an undone one is back at its saved state), the
// deletion of forgotten series and the watermark if it changed. Call it
// once the converted data was accepted (or refused and undone).
func (c *Tracker) Save(ctx context.Context, records []Record) error {
	st := c.store
	if st == nil {
		return nil
	}
	st.saveMu.Lock()
	defer st.saveMu.Unlock()
	if st.closed {
		return nil
	}

	// A fresh buffer each time: a storage may keep the values it is given.
	buf := make([]byte, 0, st.valueBytes)
	// The keys of this save share one fresh buffer, sized up front so that
	// it never moves: one allocation per save, not one per series.
	keys := make([]byte, 0, len(records)*seriesKeyLen)
	sets := st.sets[:0]
	c.mu.Lock()
	deletes := st.deletes
	st.deletes = nil
	for _, r := range records {
		s := c.lookup(r.key)
		if s == nil || s.cur.ts != r.ts || s.unknown {
			continue // moved on since (its own save writes it), undone, or forgotten
		}
		s.saved = true
		start := len(buf)
		layout, byLayout := uint64(0), false
		if s.kind == histogramSeries {
			layout, byLayout = c.layouts.id(s.cur.bounds)
		}
		buf = appendSeriesState(buf, s, layout, byLayout)
		k := len(keys)
		keys = appendSeriesStorageKey(keys, s.key)
		sets = append(sets, pendingSet{unsafe.String(&keys[k], seriesKeyLen), start, len(buf)})
		if byLayout && !st.layoutsWritten[layout] {
			st.layoutsWritten[layout] = true
			start := len(buf)
			buf = appendLayout(buf, s.cur.bounds)
			sets = append(sets, pendingSet{layoutStorageKey(layout), start, len(buf)})
		}
	}
	clear(st.layoutsWritten)
	watermark := st.watermarkChanged
	if watermark {
		start := len(buf)
		buf = appendWatermark(buf, c.watermark)
		sets = append(sets, pendingSet{WatermarkKey, start, len(buf)})
		st.watermarkChanged = false
	}
	c.mu.Unlock()

	st.sets = sets
	st.ops = st.ops[:0]
	for _, k := range deletes {
		st.ops = append(st.ops, storage.Operation{Type: storage.Delete, Key: k})
	}
	for _, s := range sets {
		st.ops = append(st.ops, storage.Operation{Type: storage.Set, Key: s.key, Value: buf[s.start:s.end:s.end]})
	}
	if len(st.ops) == 0 {
		return nil
	}
	st.ptrs = st.ptrs[:0]
	for i := range st.ops {
		st.ptrs = append(st.ptrs, &st.ops[i])
	}
	st.valueBytes = max(st.valueBytes, len(buf))
	err := st.client.Batch(ctx, st.ptrs...)
	clear(st.ops) // do not keep the values alive
	if err != nil {
		// Nothing was written: try the deletions and the watermark again
		// next time. The series are written again at their next point.
		c.mu.Lock()
		st.deletes = append(st.deletes, deletes...)
		st.watermarkChanged = st.watermarkChanged || watermark
		c.mu.Unlock()
	}
	return err
}

// Close writes what is left to write (forgotten series, the
// watermark) and closes the client; saves after it do nothing.
func (c *Tracker) Close(ctx context.Context) error {
	st := c.store
	if st == nil {
		return nil
	}
	err := c.Save(ctx, nil)
	st.saveMu.Lock()
	defer st.saveMu.Unlock()
	if st.closed {
		return nil
	}
	st.closed = true
	return errors.Join(err, st.client.Close(ctx))
}

// LargestSaveBytes is the size of the largest Save so far, in value bytes.
func (c *Tracker) LargestSaveBytes() int {
	if c.store == nil {
		return 0
	}
	c.store.saveMu.Lock()
	defer c.store.saveMu.Unlock()
	return c.store.valueBytes
}
