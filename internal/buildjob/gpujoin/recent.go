// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package gpujoin // import "github.com/gpubuild/otelcol-gpubuild/internal/buildjob/gpujoin"

import (
	"time"

	"github.com/gpubuild/otelcol-gpubuild/internal/gpucost"
)

// Recent holds, per GPU UUID, the windows of runs counted lately: a run
// counted later that overlaps one shares the overlap with it.
type Recent struct {
	byGPU map[string][]recentWindow
	keep  time.Duration // how long a counted window can still overlap a later run
}

// recentWindow is a counted run's window on a GPU.
type recentWindow struct {
	w  gpucost.Window
	id uint64
}

// maxRecentWindows bounds the windows remembered per GPU.
const maxRecentWindows = 4096

// NewRecent remembers windows for keep (the longest a run can last).
func NewRecent(keep time.Duration) *Recent {
	return &Recent{byGPU: map[string][]recentWindow{}, keep: keep}
}

// Overlapping appends to out the windows remembered on the GPU uuid, other
// than the run id's own, that overlap w.
func (c *Recent) Overlapping(out []gpucost.Window, uuid string, w gpucost.Window, id uint64) []gpucost.Window {
	for _, o := range c.byGPU[uuid] {
		if o.id != id && o.w.From.Before(w.To) && o.w.To.After(w.From) {
			out = append(out, o.w)
		}
	}
	return out
}

// Remember keeps w for later runs on the GPU, forgetting windows that
// ended longer than a run can last before w's start.
func (c *Recent) Remember(uuid string, w gpucost.Window, id uint64) {
	list := c.byGPU[uuid]
	cut := w.From.Add(-c.keep)
	i := 0
	for i < len(list) && list[i].w.To.Before(cut) {
		i++
	}
	for _, o := range list {
		if o.id == id {
			return // remembered when it began to wait for its samples
		}
	}
	list = append(list[i:], recentWindow{w: w, id: id})
	if len(list) > maxRecentWindows {
		list = list[len(list)-maxRecentWindows:]
	}
	c.byGPU[uuid] = list
}
