// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package gpucost // import "github.com/gpubuild/otelcol-gpubuild/internal/gpucost"

import (
	"slices"
	"time"
)

// Shared is one window's part of an additive figure (energy, busy time)
// when several windows overlap on one GPU.
type Shared struct {
	Value float64
	// Overlapped is how long the window shared the GPU with another.
	Overlapped time.Duration
	Reason     Reason
}

// Share splits an additive figure among windows that overlap on one GPU.
// The rule: at every instant the GPU's figure is split evenly among the
// windows open at that instant. So the time between consecutive window
// boundaries is one segment, its figure (from figure) goes in equal parts
// to the k windows open during it, and the parts of all windows add up to
// the figure of their union: nothing is counted twice. A window any of
// whose segments has no figure gets none (that segment's Reason).
func Share(windows []Window, figure func(Window) (float64, Reason)) []Shared {
	out := make([]Shared, len(windows))
	points := make([]time.Time, 0, 2*len(windows))
	for i, w := range windows {
		if w.To.Before(w.From) {
			out[i].Reason = EmptyWindow
			continue
		}
		points = append(points, w.From, w.To)
	}
	slices.SortFunc(points, func(a, b time.Time) int { return a.Compare(b) })
	points = slices.CompactFunc(points, func(a, b time.Time) bool { return a.Equal(b) })
	open := make([]int, 0, len(windows))
	for j := 0; j+1 < len(points); j++ {
		seg := Window{From: points[j], To: points[j+1]}
		open = open[:0]
		for i, w := range windows {
			if out[i].Reason != EmptyWindow && !w.From.After(seg.From) && !w.To.Before(seg.To) {
				open = append(open, i)
			}
		}
		if len(open) == 0 {
			continue // between windows
		}
		v, r := figure(seg)
		for _, i := range open {
			if len(open) > 1 {
				out[i].Overlapped += seg.To.Sub(seg.From)
			}
			if r != Covered {
				if out[i].Reason == Covered {
					out[i].Reason = r
				}
				continue
			}
			out[i].Value += v / float64(len(open))
		}
	}
	for i := range out {
		if out[i].Reason != Covered {
			out[i].Value = 0
		}
	}
	return out
}
