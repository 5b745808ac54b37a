// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derive

import (
	"hash/maphash"
	"strings"
)

// family is a pair of derived metrics sharing their attributes: a count and
// a duration histogram (the GPU families: a histogram only).
type family uint8

const (
	familyJobs   family = iota // build.jobs, build.job.duration
	familyStages               // build.stage.runs, build.stage.duration
	familyAPI                  // api.requests, api.request.duration
	// The GPU cost of counted runs: a histogram each, no count of their
	// own (build.jobs counts the runs).
	familyGPUEnergy // build.gpu.energy
	familyGPUBusy   // build.gpu.busy_time
	familyGPUMemory // build.gpu.memory.peak
	// The same per stage run.
	familyStageGPUEnergy // build.stage.gpu.energy
	familyStageGPUBusy   // build.stage.gpu.busy_time
	familyStageGPUMemory // build.stage.gpu.memory.peak
	// Mean GPM activity (Hopper and later) of runs and stage runs; after
	// the others so that persisted family numbers keep their meaning.
	familyGPUSMActivity          // build.gpu.sm_activity
	familyGPUTensorActivity      // build.gpu.tensor_activity
	familyStageGPUSMActivity     // build.stage.gpu.sm_activity
	familyStageGPUTensorActivity // build.stage.gpu.tensor_activity
	numFamilies
)

// seriesLabels identifies one derived series. While looking a series up the
// strings and values are borrowed from the input; a new series owns copies.
type seriesLabels struct {
	res *resourceEntry
	fam family
	// jobs and their GPU figures: result; stages and theirs: stage,
	// result; api: route, method, status class.
	// An empty string means the attribute is not set.
	a, b, c string
	// dims is aligned with the configured dimensions.
	dims []dimValue
}

// series accumulates one family's count and duration histogram for one set
// of labels. In delta mode it holds what happened since the last flush.
type series struct {
	labels seriesLabels
	count  int64
	hist   histogram
	// dirty: changed since the state was last persisted; stateKey: the
	// key of its persisted entry, once written.
	dirty    bool
	stateKey string
	// handedOver: accepted downstream (or dropped); never written again.
	handedOver bool
}

// histogram is an explicit-bucket histogram (seconds, or the GPU figure's unit).
type histogram struct {
	bounds []float64 // shared, read-only
	counts []uint64  // len(bounds)+1, allocated on first observation
	n      uint64
	sum    float64
	min    float64
	max    float64
}

func (h *histogram) observe(v float64) {
	if h.counts == nil {
		h.counts = make([]uint64, len(h.bounds)+1)
	}
	// Upper bounds are inclusive (OTLP explicit bucket semantics); the
	// bound lists are short, so a linear scan beats a binary search.
	i := 0
	for i < len(h.bounds) && v > h.bounds[i] {
		i++
	}
	h.counts[i]++
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if h.n == 0 || v > h.max {
		h.max = v
	}
	h.n++
	h.sum += v
}

// merge adds the observations of o, which has the same bounds.
func (h *histogram) merge(o *histogram) {
	if o.n == 0 {
		return
	}
	if h.counts == nil {
		h.counts = make([]uint64, len(h.bounds)+1)
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	if h.n == 0 || o.max > h.max {
		h.max = o.max
	}
	h.n += o.n
	h.sum += o.sum
}

// seriesTable finds the series for a set of labels by a hash of the labels,
// so a lookup on the hot path builds no string key and allocates nothing.
type seriesTable struct {
	hash   maphash.Hash
	bounds [numFamilies][]float64
	index  map[uint64]*series
	list   []*series // creation order, for deterministic output
}

func newSeriesTable(seed maphash.Seed, bounds [numFamilies][]float64) *seriesTable {
	t := &seriesTable{bounds: bounds, index: map[uint64]*series{}}
	t.hash.SetSeed(seed)
	return t
}

// get returns the series for l, creating it when needed.
func (t *seriesTable) get(l *seriesLabels) *series {
	s, slot := t.lookup(l)
	if s != nil {
		return s
	}
	s = &series{labels: l.clone(), hist: histogram{bounds: t.bounds[l.fam]}}
	t.insert(slot, s)
	return s
}

// merge adds s, a series taken from the table by an earlier flush, back
// into the table: into the series with the same labels, which it returns,
// or as itself (nil). Its labels are owned already and its resource must be
// interned in the current resource table.
func (t *seriesTable) merge(s *series) *series {
	cur, slot := t.lookup(&s.labels)
	if cur == nil {
		t.insert(slot, s)
		return nil
	}
	cur.count += s.count
	cur.hist.merge(&s.hist)
	return cur
}

// lookup returns the series for l, or nil and the free slot where it goes.
func (t *seriesTable) lookup(l *seriesLabels) (*series, uint64) {
	t.hash.Reset()
	h := &t.hash
	var id [9]byte
	id[0] = byte(l.fam)
	putUint64(id[1:], l.res.id)
	_, _ = h.Write(id[:])
	h.WriteString(l.a)
	h.WriteByte(0xff)
	h.WriteString(l.b)
	h.WriteByte(0xff)
	h.WriteString(l.c)
	h.WriteByte(0xff)
	for _, v := range l.dims {
		v.writeHash(h)
	}
	k := h.Sum64()
	for {
		s, ok := t.index[k]
		if !ok {
			return nil, k
		}
		if s.labels.equal(l) {
			return s, k
		}
		k++ // a 64-bit collision: probe the next slot
	}
}

func (t *seriesTable) insert(slot uint64, s *series) {
	t.index[slot] = s
	t.list = append(t.list, s)
}

// take removes every series from the table and returns them (delta
// temporality, at a flush). The table keeps no reference to them, so a
// flush that is refused can merge them back.
func (t *seriesTable) take() []*series {
	taken := t.list
	clear(t.index)
	t.list = make([]*series, 0, len(taken))
	return taken
}

func (l *seriesLabels) equal(o *seriesLabels) bool {
	return l.res == o.res && l.fam == o.fam && l.a == o.a && l.b == o.b && l.c == o.c && dimsEqual(l.dims, o.dims)
}

// clone returns labels that no longer reference the input batch.
func (l *seriesLabels) clone() seriesLabels {
	return seriesLabels{res: l.res, fam: l.fam, a: strings.Clone(l.a), b: strings.Clone(l.b), c: strings.Clone(l.c), dims: ownedDims(l.dims)}
}

func putUint64(b []byte, v uint64) {
	_ = b[7]
	for i := range 8 {
		b[i] = byte(v >> (8 * i))
	}
}
