// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package runmemory

import (
	"slices"
)

// StoredEntry says where and how large a job's persisted entry is; the
// tracker never reads it.
type StoredEntry struct {
	Seq   uint64 // the entry's place in the owner's key order; 0 = not written yet
	Bytes int    // the entry's size
}

// Track makes the tracker list the jobs that change (Dirty).
func (t *Tracker[P]) Track() { t.track = true }

// Untrack stops listing changes and forgets the list.
func (t *Tracker[P]) Untrack() { t.track, t.dirty = false, nil }

// Touch lists jr as changed.
func (t *Tracker[P]) Touch(jr *Job[P]) {
	if t.track && !jr.dirty {
		jr.dirty = true
		t.dirty = append(t.dirty, jr)
	}
}

// Dirty lists the jobs changed since ClearDirty, in the order they first
// changed; a job without runs was forgotten.
func (t *Tracker[P]) Dirty() []*Job[P] { return t.dirty }

// ClearDirty empties the list, once the changes are persisted.
func (t *Tracker[P]) ClearDirty() {
	for i, jr := range t.dirty {
		jr.dirty = false
		t.dirty[i] = nil
	}
	t.dirty = t.dirty[:0]
}

// EvictOldestEnded forgets the oldest counted run and returns its job;
// false when no counted run is left.
func (t *Tracker[P]) EvictOldestEnded() (*Job[P], bool) {
	r := t.ended.head
	if r == nil {
		return nil, false
	}
	t.ended.remove(r)
	t.forget(r)
	return r.job, true
}

// Restore puts back the runs of jobs read from the owner's persisted
// state, into an empty tracker: each job's runs in order, and every run on
// its list in the order of ListedAt, each payload through Config.Own. A
// job's first run is copied into the job (as a new job's is made there),
// so the caller's is then not the tracker's.
func (t *Tracker[P]) Restore(jobs map[Key][]*Run[P]) map[Key]*Job[P] {
	out := make(map[Key]*Job[P], len(jobs))
	var all []*Run[P]
	for key, runs := range jobs {
		if len(runs) == 0 {
			continue
		}
		jr := &Job[P]{key: key}
		jr.runs = append(jr.inline[:0], runs...)
		jr.first, jr.firstInUse = *runs[0], true
		jr.runs[0] = &jr.first
		for _, r := range jr.runs {
			r.job = jr
			r.Payload = t.cfg.Own(r.Payload)
		}
		jr.sort()
		t.jobs[key] = jr
		out[key] = jr
		all = append(all, jr.runs...)
	}
	slices.SortStableFunc(all, func(a, b *Run[P]) int { return a.ListedAt.Compare(b.ListedAt) })
	for _, r := range all {
		if r.State == Ended {
			t.ended.pushBack(r)
		} else {
			t.open.pushBack(r)
			r.onOpen = true
		}
	}
	return out
}
