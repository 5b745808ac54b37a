// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derive

import (
	"strconv"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/gpubuild/otelcol-gpubuild/internal/buildjob/gpujoin"
	"github.com/gpubuild/otelcol-gpubuild/internal/gpucost"
)

// The service's process id (a resource attribute): the GPU memory of a run
// is its process's.
const attrProcessPID = "process.pid"

// Bucket bounds of the GPU figures: an H100 at 700 W for half an hour is
// about 1.3 MJ; memory from 256 MiB to 128 GiB.
var (
	gpuEnergyBounds = []float64{10, 30, 100, 300, 1e3, 3e3, 1e4, 3e4, 1e5, 3e5, 1e6, 3e6}
	gpuBusyBounds   = []float64{0.1, 0.5, 1, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600}
	// SM and tensor activity: fractions.
	gpuActivityBounds = []float64{0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95}
	gpuMemoryBounds   = []float64{1 << 28, 1 << 29, 1 << 30, 1 << 31, 1 << 32, 1 << 33, 1 << 34, 1 << 35, 1 << 36, 1 << 37}
)

// processPID reads the service's process.pid resource attribute.
func processPID(res *resourceEntry) (uint32, bool) {
	v, ok := res.attrs.Get(attrProcessPID)
	if !ok {
		return 0, false
	}
	switch v.Type() {
	case pcommon.ValueTypeInt:
		if v.Int() > 0 && v.Int() <= 1<<32-1 {
			return uint32(v.Int()), true
		}
	case pcommon.ValueTypeStr:
		if p, err := strconv.ParseUint(v.Str(), 10, 32); err == nil && p > 0 {
			return uint32(p), true
		}
	}
	return 0, false
}

// gpuCost joins counted runs to the GPU samples.
type gpuCost struct {
	sampler gpucost.Sampler
	recent  *gpujoin.Recent
	nextID  uint64 // identifies a run's window among the remembered ones
	// pending: figures waiting for samples that reach their window's end.
	pending []*pendingGPU
}

func newGPUCost(s gpucost.Sampler, keep time.Duration) *gpuCost {
	return &gpuCost{sampler: s, recent: gpujoin.NewRecent(keep)}
}

// setGPUSampler joins the GPU samples of s to the runs counted from now on.
func (d *deriver) setGPUSampler(s gpucost.Sampler) {
	d.gpu = newGPUCost(s, d.jobs.Timeout())
}

func (d *deriver) skipGPU(r gpujoin.SkipReason, figures ...gpujoin.Figure) {
	for _, f := range figures {
		d.stats.gpuSkipped[f][r]++
	}
}

// gpuFigures works out a window's energy (J), busy time (s), peak memory
// (bytes) and mean SM and tensor activity (fractions).
func (d *deriver) gpuFigures(gw gpuWindow) gpujoin.Result {
	pid, hasPID := processPID(gw.res)
	req := gpujoin.Request{Window: gw.w, Hint: gw.hint, PID: pid, HasPID: hasPID}
	var overlapping func(*gpucost.Series, time.Duration) []gpucost.Window
	if gw.share {
		overlapping = func(g *gpucost.Series, maxGap time.Duration) []gpucost.Window { return d.overlapping(g, gw, maxGap) }
	}
	return gpujoin.Figures(d.gpu.sampler, req, overlapping)
}

// gpuWindow is what the GPU figures of a run or a stage are taken for.
type gpuWindow struct {
	w    gpucost.Window
	hint gpujoin.Hint
	res  *resourceEntry
	// share: a run shares overlaps with the other runs on its GPUs, and is
	// remembered for later ones; a stage is within its run and does not.
	share  bool
	offset gpujoin.Figure // 0 for a run, gpujoin.StageFigures for a stage
	// id: the run's remembered window (share), not an overlap of its own.
	id uint64
}

// overlapping returns w first, then the windows of the other runs on g
// that overlap it: runs counted before (remembered) and active runs whose
// start is known, open until w's end. An active run is on g when it names
// g, or names no GPU and is of the same service instance, or its
// process held memory on g.
func (d *deriver) overlapping(g *gpucost.Series, gw gpuWindow, maxGap time.Duration) []gpucost.Window {
	w, res := gw.w, gw.res
	out := d.gpu.recent.Overlapping([]gpucost.Window{w}, g.UUID, w, gw.id)
	end := pcommon.NewTimestampFromTime(w.To)
	d.jobs.ForEachActiveRun(func(start pcommon.Timestamp, p runPayload) {
		if start == 0 || start >= end {
			return
		}
		o := gpucost.Window{From: start.AsTime(), To: w.To}
		on := false
		switch {
		case !p.gpu.None():
			on = p.gpu.Matches(g)
		case p.res == res:
			on = true
		default:
			if pid, ok := processPID(p.res); ok {
				_, on, _ = gpucost.PeakMemory(g.Memory, pid, o, maxGap)
			}
		}
		if on {
			out = append(out, o)
		}
	})
	return out
}
