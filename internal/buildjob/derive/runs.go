// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derive

import (
	"slices"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/gpubuild/otelcol-gpubuild/internal/buildjob/gpujoin"
	"github.com/gpubuild/otelcol-gpubuild/internal/buildjob/runmemory"
)

// runPayload is what the derivation attaches to a job run: the resource and
// dimensions its count goes to.
type runPayload struct {
	res  *resourceEntry
	dims []dimValue
	// gpu: the GPU the run's records name, if any (not persisted: a run
	// restored after a restart has no GPU samples before the restart).
	gpu gpujoin.Hint
}

// runTracker is the run memory, with the derivation's payload.
type runTracker = runmemory.Tracker[runPayload]

// countedRun is one run to add to build.jobs and build.job.duration.
type countedRun struct {
	res         *resourceEntry
	dims        []dimValue
	result      string
	seconds     float64
	hasDuration bool
	start, end  pcommon.Timestamp // the window, with hasDuration
	gpu         gpujoin.Hint
}

func newRunTracker(cfg *jobSettings, count func(countedRun)) *runTracker {
	dims := newSharedDims()
	return runmemory.New(runmemory.Config[runPayload]{
		Timeout:       cfg.JobTimeout,
		PendingGrace:  cfg.MetricsFlushInterval,
		MaxRuns:       cfg.MaxActiveJobs,
		TimeoutResult: resultTimeout,
		// The resource entry is the derivation's own; the dimensions are
		// borrowed from the input batch, and kept shared between runs.
		Own: func(p runPayload) runPayload { return runPayload{res: p.res, dims: dims.own(p.dims), gpu: p.gpu.Own()} },
		// A later record may set a dimension the first one lacked: the run
		// takes another tuple, never writing into a shared one.
		Fill: func(have *runPayload, from runPayload) {
			var filled []dimValue
			for i, v := range from.dims {
				if have.dims[i].kind == dimUnset && v.kind != dimUnset {
					if filled == nil {
						filled = slices.Clone(have.dims)
					}
					filled[i] = v
				}
			}
			if filled != nil {
				have.dims = dims.own(filled)
			}
			if have.gpu.None() && !from.gpu.None() {
				have.gpu = from.gpu.Own()
			}
		},
		Count: func(c runmemory.Counted[runPayload]) {
			count(countedRun{res: c.Payload.res, dims: c.Payload.dims, result: c.Result, seconds: c.Seconds, hasDuration: c.HasDuration,
				start: c.Start, end: c.End, gpu: c.Payload.gpu})
		},
	})
}

// takeStats returns the stats since the last call, the run memory's
// included, and resets them.
func (d *deriver) takeStats() derivationStats {
	s := d.peekStats()
	d.stats = derivationStats{}
	if d.jobs != nil {
		d.jobs.TakeStats()
	}
	return s
}

// peekStats returns the stats since the last takeStats, the run memory's
// included.
func (d *deriver) peekStats() derivationStats {
	s := d.stats
	if d.jobs != nil {
		r := d.jobs.Stats()
		s.deduplicated += r.Deduplicated
		s.skipped[skipEndBeforeStart] += r.EndBeforeStart
		s.evicted[evictedActive] += r.EvictedActive
		s.evicted[evictedEnded] += r.EvictedEnded
	}
	return s
}
