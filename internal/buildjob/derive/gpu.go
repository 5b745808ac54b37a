// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derive

import (
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/gpubuild/otelcol-gpubuild/internal/gpucost"
)

// Input attributes naming the GPU a run used (optional, on the job span or
// the status records), and the service's process id (resource).
const (
	attrHWID       = "hw.id"
	attrGPUIndex   = "gpu.index"
	attrProcessPID = "process.pid"
)

// Bucket bounds of the GPU figures: an H100 at 700 W for half an hour is
// about 1.3 MJ; memory from 256 MiB to 128 GiB.
var (
	gpuEnergyBounds = []float64{10, 30, 100, 300, 1e3, 3e3, 1e4, 3e4, 1e5, 3e5, 1e6, 3e6}
	gpuBusyBounds   = []float64{0.1, 0.5, 1, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600}
	// SM and tensor activity: fractions.
	gpuActivityBounds = []float64{0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95}
	gpuMemoryBounds   = []float64{1 << 28, 1 << 29, 1 << 30, 1 << 31, 1 << 32, 1 << 33, 1 << 34, 1 << 35, 1 << 36, 1 << 37}
)

// gpuHint is the GPU a run's records name: hw.id (the UUID) wins over
// gpu.index.
type gpuHint struct {
	uuid     string
	index    int64
	hasIndex bool
}

func (h gpuHint) none() bool { return h.uuid == "" && !h.hasIndex }

// own copies the UUID out of the input batch.
func (h gpuHint) own() gpuHint {
	h.uuid = strings.Clone(h.uuid)
	return h
}

func (h gpuHint) matches(s *gpucost.Series) bool {
	if h.uuid != "" {
		return h.uuid == s.UUID
	}
	return h.hasIndex && h.index == int64(s.Index)
}

func gpuHintFrom(attrs pcommon.Map) gpuHint {
	var h gpuHint
	if v, ok := attrs.Get(attrHWID); ok && v.Type() == pcommon.ValueTypeStr {
		h.uuid = v.Str()
	}
	if v, ok := attrs.Get(attrGPUIndex); ok {
		switch v.Type() {
		case pcommon.ValueTypeInt:
			h.index, h.hasIndex = v.Int(), v.Int() >= 0
		case pcommon.ValueTypeStr:
			if i, err := strconv.ParseInt(v.Str(), 10, 64); err == nil && i >= 0 {
				h.index, h.hasIndex = i, true
			}
		}
	}
	return h
}

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

// gpuFigure is one of the per-run GPU figures.
type gpuFigure uint8

const (
	figureEnergy gpuFigure = iota
	figureBusy
	figureMemory
	figureSMActivity
	figureTensorActivity
	figureStageEnergy
	figureStageBusy
	figureStageMemory
	figureStageSMActivity
	figureStageTensorActivity
	numGPUFigures
)

// numFigures is how many figures a run (or a stage run) has.
const numFigures = int(figureStageEnergy)

// stageFigures is the offset from a run's figure to the stage's.
const stageFigures = figureStageEnergy - figureEnergy

func (f gpuFigure) String() string {
	return [...]string{"energy", "busy_time", "memory_peak", "sm_activity", "tensor_activity",
		"stage_energy", "stage_busy_time", "stage_memory_peak", "stage_sm_activity", "stage_tensor_activity"}[f]
}

// gpuSkipReason says why a run has no GPU figure: gpucost's reasons, then
// the derivation's own.
type gpuSkipReason uint8

const (
	gpuSkipNoWindow        = gpuSkipReason(gpucost.NumReasons) + iota // the run has no start or end (timed out, end only)
	gpuSkipGPUNotFound                                                // the run names a GPU the sampler does not see
	gpuSkipNoPID                                                      // the service has no process.pid resource attribute
	gpuSkipProcessNotOnGPU                                            // the service's process held no memory on the run's GPUs
	gpuSkipNoGPM                                                      // a GPU of the run has no GPM (before Hopper): no SM or tensor activity
	numGPUSkipReasons
)

func (r gpuSkipReason) String() string {
	switch r {
	case gpuSkipNoWindow:
		return "no_window"
	case gpuSkipGPUNotFound:
		return "gpu_not_found"
	case gpuSkipNoPID:
		return "no_process_pid"
	case gpuSkipProcessNotOnGPU:
		return "process_not_on_gpu"
	case gpuSkipNoGPM:
		return "no_gpm"
	}
	return gpucost.Reason(r).String()
}

// gpuCost joins counted runs to the GPU samples.
type gpuCost struct {
	sampler gpucost.Sampler
	// recent holds, per GPU UUID, the windows of runs counted lately: a run
	// counted later that overlaps one shares the overlap with it.
	recent map[string][]recentWindow
	nextID uint64        // identifies a run's window among the remembered ones
	keep   time.Duration // how long a counted window can still overlap a later run
	// pending: figures waiting for samples that reach their window's end.
	pending []*pendingGPU
}

// maxRecentWindows bounds the windows remembered per GPU.
const maxRecentWindows = 4096

func newGPUCost(s gpucost.Sampler, keep time.Duration) *gpuCost {
	return &gpuCost{sampler: s, recent: map[string][]recentWindow{}, keep: keep}
}

// setGPUSampler joins the GPU samples of s to the runs counted from now on.
func (d *deriver) setGPUSampler(s gpucost.Sampler) {
	d.gpu = newGPUCost(s, d.jobs.Timeout())
}

func (d *deriver) skipGPU(r gpuSkipReason, figures ...gpuFigure) {
	for _, f := range figures {
		d.stats.gpuSkipped[f][r]++
	}
}

// gpuWindow is what the GPU figures of a run or a stage are taken for.
type gpuWindow struct {
	w    gpucost.Window
	hint gpuHint
	res  *resourceEntry
	// share: a run shares overlaps with the other runs on its GPUs, and is
	// remembered for later ones; a stage is within its run and does not.
	share  bool
	offset gpuFigure // 0 for a run, stageFigures for a stage
	// id: the run's remembered window (share), not an overlap of its own.
	id uint64
}

// gpuResult is what the samples give a window: each figure's value, or why
// it has none. In gpuFigure order: energy, busy time, peak memory, SM
// activity, tensor activity.
type gpuResult struct {
	vals    [numFigures]float64
	reasons [numFigures]gpuSkipReason // gpuCovered: the figure is in vals
	// notYet: the samples end before the window does (its end has just
	// passed, or the driver's next utilization sample is still to come):
	// worth another try.
	notYet     bool
	overlapped bool
	gpus       []string // the UUIDs of the GPUs it was charged to
}

const gpuCovered = gpuSkipReason(gpucost.Covered)

// gpuFigures works out a window's energy (J), busy time (s), peak memory
// (bytes) and mean SM and tensor activity (fractions).
func (d *deriver) gpuFigures(gw gpuWindow) gpuResult {
	var out gpuResult
	series := d.gpu.sampler.Samples(gw.w.From, gw.w.To)
	if len(series) == 0 {
		for i := range out.reasons {
			out.reasons[i] = gpuSkipReason(gpucost.NoSamples)
		}
		return out
	}
	maxGap := d.gpu.sampler.MaxGap()
	pid, hasPID := processPID(gw.res)
	gpus := d.pickGPUs(series, gw.hint, pid, hasPID, gw.w, maxGap)
	if gpus == nil {
		for i := range out.reasons {
			out.reasons[i] = gpuSkipGPUNotFound
		}
		return out
	}
	d.activityFigures(&out, gpus, gw.w, maxGap)
	for _, g := range gpus {
		out.gpus = append(out.gpus, g.UUID)
		out.notYet = out.notYet || endsBefore(g, gw.w.To)
		windows := []gpucost.Window{gw.w}
		if gw.share {
			windows = d.overlapping(g, gw, maxGap)
		}
		for i, figure := range [2]func(gpucost.Window) (float64, gpucost.Reason){
			func(x gpucost.Window) (float64, gpucost.Reason) { return gpucost.Energy(g.Energy, g.Power, x, maxGap) },
			func(x gpucost.Window) (float64, gpucost.Reason) { return gpucost.BusyTime(g.Util, x, maxGap) },
		} {
			sh := gpucost.Share(windows, figure)[0]
			if sh.Reason != gpucost.Covered && out.reasons[i] == gpuCovered {
				out.reasons[i] = gpuSkipReason(sh.Reason)
			}
			out.vals[i] += sh.Value
			out.overlapped = out.overlapped || sh.Overlapped > 0
		}
	}
	for i := range 2 {
		if out.reasons[i] != gpuCovered {
			out.vals[i] = 0
		}
	}
	if !hasPID {
		out.reasons[figureMemory] = gpuSkipNoPID
		return out
	}
	found := false
	for _, g := range gpus {
		p, ok, r := gpucost.PeakMemory(g.Memory, pid, gw.w, maxGap)
		if r != gpucost.Covered {
			out.reasons[figureMemory] = gpuSkipReason(r)
			return out
		}
		if ok {
			out.vals[figureMemory] += float64(p) // on several GPUs: the sum of each GPU's peak
			found = true
		}
	}
	if !found {
		out.reasons[figureMemory] = gpuSkipProcessNotOnGPU
	}
	return out
}

// activityFigures works out the mean SM and tensor activity of w: each
// GPU's time-weighted mean of its GPM periods over w; on several GPUs, the
// mean of theirs. A mean is not additive, so runs sharing a GPU each get
// the GPU's activity over their own window, not a split of it. Any GPU of
// the run without GPM: no figure (no_gpm).
func (d *deriver) activityFigures(out *gpuResult, gpus []*gpucost.Series, w gpucost.Window, maxGap time.Duration) {
	for i, pick := range [2]func(*gpucost.Series) []gpucost.UtilSample{
		func(s *gpucost.Series) []gpucost.UtilSample { return s.SMActivity },
		func(s *gpucost.Series) []gpucost.UtilSample { return s.TensorActivity },
	} {
		f := figureSMActivity + gpuFigure(i)
		var sum float64
		for _, g := range gpus {
			if !g.GPM {
				out.reasons[f] = gpuSkipNoGPM
				break
			}
			m, r := gpucost.MeanActivity(pick(g), w, maxGap)
			if r != gpucost.Covered {
				out.reasons[f] = gpuSkipReason(r)
				break
			}
			sum += m
		}
		if out.reasons[f] == gpuCovered {
			out.vals[f] = sum / float64(len(gpus))
		}
	}
}

// endsBefore reports whether g's samples of some kind end before t.
func endsBefore(g *gpucost.Series, t time.Time) bool {
	return (len(g.Energy) > 0 && g.Energy[len(g.Energy)-1].T.Before(t)) ||
		(len(g.Util) > 0 && g.Util[len(g.Util)-1].T.Before(t)) ||
		(len(g.Memory) > 0 && g.Memory[len(g.Memory)-1].T.Before(t)) ||
		(len(g.SMActivity) > 0 && g.SMActivity[len(g.SMActivity)-1].T.Before(t))
}

var (
	runGPUFamilies   = [numFigures]family{familyGPUEnergy, familyGPUBusy, familyGPUMemory, familyGPUSMActivity, familyGPUTensorActivity}
	stageGPUFamilies = [numFigures]family{familyStageGPUEnergy, familyStageGPUBusy, familyStageGPUMemory,
		familyStageGPUSMActivity, familyStageGPUTensorActivity}
)

// maxPendingGPU bounds the windows waiting for their samples.
const maxPendingGPU = 4096

// pickGPUs chooses the GPUs a run used: the one its records name; else
// those where the service's process held memory during the run; else
// every GPU. nil: the named GPU is not among the sampler's.
func (d *deriver) pickGPUs(series []gpucost.Series, hint gpuHint, pid uint32, hasPID bool, w gpucost.Window, maxGap time.Duration) []*gpucost.Series {
	if !hint.none() {
		for i := range series {
			if hint.matches(&series[i]) {
				return []*gpucost.Series{&series[i]}
			}
		}
		return nil
	}
	var out []*gpucost.Series
	if hasPID {
		for i := range series {
			if _, found, _ := gpucost.PeakMemory(series[i].Memory, pid, w, maxGap); found {
				out = append(out, &series[i])
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	for i := range series {
		out = append(out, &series[i])
	}
	return out
}

// overlapping returns w first, then the windows of the other runs on g
// that overlap it: runs counted before (remembered) and active runs whose
// start is known, open until w's end. An active run is on g when it names
// g, or names no GPU and is of the same service instance, or its
// process held memory on g.
func (d *deriver) overlapping(g *gpucost.Series, gw gpuWindow, maxGap time.Duration) []gpucost.Window {
	w, res := gw.w, gw.res
	out := []gpucost.Window{w}
	for _, o := range d.gpu.recent[g.UUID] {
		if o.id != gw.id && o.w.From.Before(w.To) && o.w.To.After(w.From) {
			out = append(out, o.w)
		}
	}
	end := pcommon.NewTimestampFromTime(w.To)
	d.jobs.ForEachActiveRun(func(start pcommon.Timestamp, p runPayload) {
		if start == 0 || start >= end {
			return
		}
		o := gpucost.Window{From: start.AsTime(), To: w.To}
		on := false
		switch {
		case !p.gpu.none():
			on = p.gpu.matches(g)
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
