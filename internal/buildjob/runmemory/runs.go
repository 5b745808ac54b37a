// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package runmemory

import (
	"math"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// position orders the runs of one job in time.
func (r *Run[P]) position() pcommon.Timestamp {
	if r.Start != 0 {
		return r.Start
	}
	return r.End
}

// runList is an intrusive doubly linked list of runs.
type runList[P any] struct {
	head, tail *Run[P]
	len        int
}

func (l *runList[P]) pushBack(r *Run[P]) {
	r.prev, r.next = l.tail, nil
	if l.tail != nil {
		l.tail.next = r
	} else {
		l.head = r
	}
	l.tail = r
	l.len++
}

func (l *runList[P]) remove(r *Run[P]) {
	if r.prev != nil {
		r.prev.next = r.next
	} else {
		l.head = r.next
	}
	if r.next != nil {
		r.next.prev = r.prev
	} else {
		l.tail = r.prev
	}
	r.prev, r.next = nil, nil
	l.len--
}

func (jr *Job[P]) insert(r *Run[P]) {
	jr.runs = append(jr.runs, r)
	jr.sort()
}

// sort restores the order by position (insertion sort: a job has few runs).
func (jr *Job[P]) sort() {
	for i := 1; i < len(jr.runs); i++ {
		for j := i; j > 0 && jr.runs[j].position() < jr.runs[j-1].position(); j-- {
			jr.runs[j], jr.runs[j-1] = jr.runs[j-1], jr.runs[j]
		}
	}
}

// mostOverlapping returns the run without a span whose time range overlaps
// [start, end] the most. A run's range is bounded by its neighbours where
// its own start or end is unknown.
func (jr *Job[P]) mostOverlapping(start, end pcommon.Timestamp) *Run[P] {
	var best *Run[P]
	bestOverlap := int64(-1)
	s, e := int64(start), int64(end)
	for i, r := range jr.runs {
		if r.HasSpan {
			continue
		}
		lo, hi := int64(r.Start), int64(r.End)
		if r.Start == 0 {
			lo = math.MinInt64
			if i > 0 {
				lo = int64(jr.runs[i-1].position())
			}
		}
		if r.End == 0 {
			hi = math.MaxInt64
			if i+1 < len(jr.runs) {
				hi = int64(jr.runs[i+1].position())
			}
		}
		overlap := min(hi, e) - max(lo, s)
		if overlap >= 0 && overlap > bestOverlap {
			best, bestOverlap = r, overlap
		}
	}
	return best
}
