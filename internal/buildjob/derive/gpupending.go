// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derive

import (
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/gpubuild/otelcol-gpubuild/internal/buildjob/gpujoin"
	"github.com/gpubuild/otelcol-gpubuild/internal/gpucost"
)

var (
	runGPUFamilies   = [gpujoin.NumFigures]family{familyGPUEnergy, familyGPUBusy, familyGPUMemory, familyGPUSMActivity, familyGPUTensorActivity}
	stageGPUFamilies = [gpujoin.NumFigures]family{familyStageGPUEnergy, familyStageGPUBusy, familyStageGPUMemory,
		familyStageGPUSMActivity, familyStageGPUTensorActivity}
)

// pendingGPU is a run's or stage's GPU figures to emit: at once, or once
// the samples reach the window's end.
type pendingGPU struct {
	gw       gpuWindow
	res      *resourceEntry
	a, b     string // the series labels: result; or stage, result
	dims     []dimValue
	families [gpujoin.NumFigures]family
	deadline time.Time // give up waiting for samples then
}

// maxPendingGPU bounds the windows waiting for their samples.
const maxPendingGPU = 4096

// countGPU adds one counted run's GPU figures, or counts why it has none.
func (d *deriver) countGPU(c *countedRun, res *resourceEntry) {
	if !c.hasDuration {
		d.skipGPU(gpujoin.SkipNoWindow, gpujoin.FigureEnergy, gpujoin.FigureBusy, gpujoin.FigureMemory, gpujoin.FigureSMActivity, gpujoin.FigureTensorActivity)
		return
	}
	d.emitGPU(pendingGPU{
		gw:  gpuWindow{w: gpucost.Window{From: c.start.AsTime(), To: c.end.AsTime()}, hint: c.gpu, res: c.res, share: true},
		res: res, a: c.result, dims: c.dims, families: runGPUFamilies,
	})
}

// countStageGPU adds one stage run's GPU figures, or counts why it has none.
func (d *deriver) countStageGPU(res *resourceEntry, start, end pcommon.Timestamp, hint gpujoin.Hint, stage, result string, dims []dimValue) {
	d.emitGPU(pendingGPU{
		gw:  gpuWindow{w: gpucost.Window{From: start.AsTime(), To: end.AsTime()}, hint: hint, res: res, offset: gpujoin.StageFigures},
		res: res, a: stage, b: result, dims: dims, families: stageGPUFamilies,
	})
}

// emitGPU emits p's figures, or keeps it for a later try when the samples
// do not reach its end yet: a run counted the moment it ends may precede
// the driver's next utilization sample. It gives up (and counts why) at
// the deadline, or at the final flush. p is taken by value: only a window
// that waits is allocated (a span's stages are counted by the thousand a
// second).
func (d *deriver) emitGPU(pv pendingGPU) {
	if pv.gw.share {
		d.gpu.nextID++
		pv.gw.id = d.gpu.nextID
	}
	if !d.tryGPU(&pv, false) {
		if len(d.gpu.pending) >= maxPendingGPU {
			d.tryGPU(&pv, true)
			return
		}
		p := &pendingGPU{}
		*p = pv
		p.deadline = time.Now().Add(gpuPendingGrace(d.gpu.sampler.MaxGap()))
		p.a, p.b = strings.Clone(p.a), strings.Clone(p.b)
		p.gw.hint = p.gw.hint.Own()
		p.dims = ownedDims(p.dims)
		d.gpu.pending = append(d.gpu.pending, p)
	}
}

// retryGPU tries the pending figures again (each flush); final gives up on
// those still not covered.
func (d *deriver) retryGPU(final bool) {
	kept := d.gpu.pending[:0]
	for _, p := range d.gpu.pending {
		if !d.tryGPU(p, final || !time.Now().Before(p.deadline)) {
			kept = append(kept, p)
		}
	}
	clear(d.gpu.pending[len(kept):])
	d.gpu.pending = kept
}

// gpuPendingGrace is how long after its end a window may wait for samples:
// the driver's utilization samples come about every 1/6 s; the sampler's
// own at most maxGap apart.
func gpuPendingGrace(maxGap time.Duration) time.Duration {
	return max(5*time.Second, 2*maxGap)
}

// tryGPU emits p's figures and returns true, or returns false when its
// samples do not reach its end yet and final is false. A run waiting is
// remembered on its GPUs at once, so that runs counted meanwhile share
// their overlap with it.
func (d *deriver) tryGPU(p *pendingGPU, final bool) bool {
	r := d.gpuFigures(p.gw)
	if r.NotYet && !final {
		for _, reason := range r.Reasons {
			if reason == gpujoin.SkipReason(gpucost.NotCovered) {
				if p.gw.share {
					for _, uuid := range r.GPUs {
						d.gpu.recent.Remember(uuid, p.gw.w, p.gw.id)
					}
				}
				return false
			}
		}
	}
	res := d.resources.reintern(p.res)
	for i, fam := range p.families {
		if r.Reasons[i] == gpujoin.Covered {
			d.observeGPU(fam, res, p.a, p.b, p.dims, r.Vals[i])
		} else {
			d.skipGPU(r.Reasons[i], gpujoin.Figure(i)+p.gw.offset)
		}
	}
	if p.gw.share {
		for _, uuid := range r.GPUs {
			d.gpu.recent.Remember(uuid, p.gw.w, p.gw.id)
		}
		if r.Overlapped {
			d.stats.gpuOverlappingRuns++
		}
	}
	return true
}

func (d *deriver) observeGPU(fam family, res *resourceEntry, a, b string, dims []dimValue, v float64) {
	d.labels = seriesLabels{res: res, fam: fam, a: a, b: b, dims: dims}
	s := d.series.get(&d.labels)
	s.count++
	s.hist.observe(v)
	d.markDirty(s)
}
