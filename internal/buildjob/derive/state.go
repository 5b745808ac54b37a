// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derive

import (
	"context"
	"slices"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"

	"github.com/gpubuild/otelcol-gpubuild/internal/buildjob/derivestate"
	"github.com/gpubuild/otelcol-gpubuild/internal/buildjob/runmemory"
)

// derivationState is the derivation's side of its persisted state: which
// entries a request changed, as plain records, and putting back what a
// previous process saved. The store (derivestate) knows the format and the
// storage. It is used under the emitter's lock.
type derivationState struct {
	store *derivestate.Store
	// Scratch space for the records of one job, and the keys of one
	// accepted flush.
	runs []derivestate.Run
	dims []derivestate.Dim
	keys []string
}

// openState gets the storage client and loads what a previous process
// saved into d.
func openState(ctx context.Context, host component.Host, owner component.ID, kind component.Kind, cfg derivestate.Config, d *deriver, now time.Time, logger *zap.Logger) (*derivationState, error) {
	store, err := derivestate.Open(ctx, host, kind, owner, cfg, logger)
	if err != nil {
		return nil, err
	}
	st := &derivationState{store: store}
	// Tracking is on while loading: what the load merges or trims is
	// written with the first batch.
	d.state = st
	if d.jobs != nil {
		d.jobs.Track()
	}
	snap, err := store.Load(ctx, stateLayout(d), now)
	if err != nil {
		d.state, d.dirtySeries = nil, nil
		if d.jobs != nil {
			d.jobs.Untrack()
		}
		_ = store.Close(ctx)
		return nil, err
	}
	st.restore(d, snap)
	return st, nil
}

// restore puts back what a previous process saved: the counts as a refused
// flush would be, the runs oldest first so that the open and ended lists
// keep their order.
func (st *derivationState) restore(d *deriver, snap *derivestate.Snapshot) {
	if d.cumulative {
		d.restoredStart = snap.Start
	}
	resolve := func(key string) *resourceEntry {
		res := pcommon.NewResource()
		snap.Resources[key].CopyTo(res.Attributes())
		return d.resources.intern(res)
	}
	for i := range snap.Series {
		e := &snap.Series[i]
		s := d.seriesFromState(&e.Series, resolve(e.Resource))
		s.stateKey = e.Key
		st.mergeSeries(d, s)
	}
	if d.jobs != nil {
		restored := make(map[runmemory.Key][]*runmemory.Run[runPayload], len(snap.Jobs))
		saved := make(map[runmemory.Key]*derivestate.SavedJob, len(snap.Jobs))
		for i := range snap.Jobs {
			j := &snap.Jobs[i]
			runs := make([]*runmemory.Run[runPayload], len(j.Runs))
			for k, r := range j.Runs {
				runs[k] = &runmemory.Run[runPayload]{
					State: r.State, HasSpan: r.HasSpan, Start: r.Start, End: r.End,
					LogStart: r.LogStart, LogEnd: r.LogEnd, SpanStart: r.SpanStart, SpanEnd: r.SpanEnd,
					Result: r.Result, ListedAt: r.ListedAt,
					Payload: runPayload{res: resolve(r.Resource), dims: fromStateDims(r.Dims)},
				}
			}
			restored[j.Key], saved[j.Key] = runs, j
		}
		for jk, jr := range d.jobs.Restore(restored) {
			jr.Stored = saved[jk].Stored
			if saved[jk].Rewrite {
				d.jobs.Touch(jr)
			}
		}
	}
	for i, n := range snap.Skipped {
		d.stats.stateSkipped[i] += n
	}
}

// persist writes what changed since the last call: the dirty jobs and
// series, and the deletions of forgotten ones, in one batch. On failure the
// entries stay dirty and are written with the next batch; the counts stay
// in memory meanwhile. When the run memory is then over its byte budget,
// the oldest counted runs are forgotten and a second batch writes that.
func (st *derivationState) persist(ctx context.Context, d *deriver) error {
	if d.httpTracker != nil {
		// Joins this batch through the store's Joiner; it cannot fail.
		_ = d.httpTracker.Save(ctx, d.httpResult.Records)
		d.httpResult.Records = d.httpResult.Records[:0]
	}
	if err := st.write(ctx, d); err != nil {
		return err
	}
	if d.jobs != nil && st.store.OverBudget() {
		st.evictOverBudget(d)
		return st.write(ctx, d)
	}
	return nil
}

func (st *derivationState) write(ctx context.Context, d *deriver) error {
	store := st.store
	store.Begin()
	if d.jobs != nil {
		for _, jr := range d.jobs.Dirty() {
			if len(jr.Runs()) == 0 {
				store.DeleteJob(&jr.Stored, jr.Key())
				continue
			}
			store.PutJob(&jr.Stored, jr.Key(), st.runRecords(jr.Runs()))
		}
	}
	var rec derivestate.Series
	for _, s := range d.dirtySeries {
		if s.handedOver {
			continue
		}
		st.dims = st.dims[:0]
		rec = st.seriesRecord(s, store.Resource(&s.labels.res.stateRef, s.labels.res.attrs))
		store.PutSeries(&s.stateKey, &rec)
	}
	// Do not keep the values alive.
	clear(st.dims[:cap(st.dims)])
	clear(st.runs[:cap(st.runs)])
	if d.metaDirty {
		store.PutMeta(d.startTime)
	}
	if store.Empty() {
		return nil
	}
	if err := store.Commit(ctx); err != nil {
		d.stats.stateWriteFailures++
		return err
	}
	d.clearDirty()
	if store.CheckpointFailed() {
		d.stats.stateWriteFailures++
	}
	return nil
}

// stateLayout is what d's persisted entries must fit.
func stateLayout(d *deriver) derivestate.Layout {
	l := derivestate.Layout{Dims: len(d.dimensions), Buckets: make([]int, numFamilies)}
	for f, b := range d.series.bounds {
		l.Buckets[f] = len(b) + 1
	}
	if d.jobs != nil {
		l.Runs, l.JobTimeout = true, d.jobs.Timeout()
	}
	return l
}

// seriesRecord is s's record, its resource's entry under resKey; its
// dimensions are in scratch space.
func (st *derivationState) seriesRecord(s *series, resKey string) derivestate.Series {
	return derivestate.Series{
		Family: uint8(s.labels.fam), A: s.labels.a, B: s.labels.b, C: s.labels.c,
		Resource: resKey,
		Dims:     st.stateDims(s.labels.dims),
		Count:    s.count,
		Hist:     derivestate.Histogram{N: s.hist.n, Sum: s.hist.sum, Min: s.hist.min, Max: s.hist.max, Counts: s.hist.counts},
	}
}

// seriesFromState is the series of a record, of resource res.
func (d *deriver) seriesFromState(e *derivestate.Series, res *resourceEntry) *series {
	return &series{
		labels: seriesLabels{res: res, fam: family(e.Family), a: e.A, b: e.B, c: e.C, dims: fromStateDims(e.Dims)},
		count:  e.Count,
		hist: histogram{
			bounds: d.series.bounds[e.Family], counts: e.Hist.Counts,
			n: e.Hist.N, sum: e.Hist.Sum, min: e.Hist.Min, max: e.Hist.Max,
		},
	}
}

// runRecords returns the records of a job's runs, in scratch space that
// the next call reuses.
func (st *derivationState) runRecords(runs []*runmemory.Run[runPayload]) []derivestate.Run {
	n := 0
	for _, r := range runs {
		n += len(r.Payload.dims)
	}
	// Grown once: the runs' dimensions are slices of it.
	st.dims = slices.Grow(st.dims[:0], n)
	st.runs = st.runs[:0]
	for _, r := range runs {
		st.runs = append(st.runs, derivestate.Run{
			State: r.State, HasSpan: r.HasSpan, Start: r.Start, End: r.End,
			LogStart: r.LogStart, LogEnd: r.LogEnd, SpanStart: r.SpanStart, SpanEnd: r.SpanEnd,
			Result: r.Result, ListedAt: r.ListedAt,
			Resource: st.store.Resource(&r.Payload.res.stateRef, r.Payload.res.attrs),
			Dims:     st.stateDims(r.Payload.dims),
		})
	}
	return st.runs
}

// stateDims appends dims' records to the scratch space.
func (st *derivationState) stateDims(dims []dimValue) []derivestate.Dim {
	start := len(st.dims)
	for _, v := range dims {
		st.dims = append(st.dims, derivestate.Dim{Kind: derivestate.DimKind(v.kind), Str: v.str, Other: v.other})
	}
	return st.dims[start:len(st.dims):len(st.dims)]
}

// fromStateDims returns the dimension values of the records.
func fromStateDims(dims []derivestate.Dim) []dimValue {
	out := make([]dimValue, len(dims))
	for i, v := range dims {
		out[i] = dimValue{kind: dimKind(v.Kind), str: v.Str, other: v.Other}
	}
	return out
}

// evictOverBudget forgets the oldest counted runs while the persisted run
// memory is over its byte budget. A forgotten run's late record may count
// it again, so each eviction is counted and logged.
func (st *derivationState) evictOverBudget(d *deriver) {
	for st.store.OverBudget() {
		jr, ok := d.jobs.EvictOldestEnded()
		if !ok {
			return
		}
		d.stats.stateEvicted++
		st.store.RunForgotten(&jr.Stored, len(jr.Runs()))
	}
}

// accepted deletes the entries of series the next consumer accepted (or
// that were dropped for good).
func (st *derivationState) accepted(ctx context.Context, taken []*series) error {
	st.keys = st.keys[:0]
	for _, s := range taken {
		s.handedOver = true
		if s.stateKey != "" {
			st.keys = append(st.keys, s.stateKey)
		}
	}
	err := st.store.Delete(ctx, st.keys)
	clear(st.keys)
	return err
}

// mergeSeries puts s, persisted under s.stateKey, into d's table: as
// itself, or added to the series with the same labels, whose entry is then
// rewritten and s's deleted.
func (st *derivationState) mergeSeries(d *deriver, s *series) {
	cur := d.series.merge(s)
	if cur == nil {
		return
	}
	d.markDirty(cur)
	if s.stateKey != "" {
		st.store.QueueDelete(s.stateKey)
	}
}
