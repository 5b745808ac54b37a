// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package gpujoin // import "github.com/gpubuild/otelcol-gpubuild/internal/buildjob/gpujoin"

import (
	"time"

	"github.com/gpubuild/otelcol-gpubuild/internal/gpucost"
)

// Request is the window a run's or a stage's figures are taken for.
type Request struct {
	Window gpucost.Window
	Hint   Hint
	// PID: the service's process.pid, when HasPID.
	PID    uint32
	HasPID bool
}

// Result is what the samples give a window: each figure's value, or why
// it has none. In Figure order: energy, busy time, peak memory, SM
// activity, tensor activity.
type Result struct {
	Vals    [NumFigures]float64
	Reasons [NumFigures]SkipReason // Covered: the figure is in Vals
	// NotYet: the samples end before the window does (its end has just
	// passed, or the driver's next utilization sample is still to come):
	// worth another try.
	NotYet bool
	// Overlapped: a figure was shared with an overlapping run.
	Overlapped bool
	GPUs       []string // the UUIDs of the GPUs it was charged to
}

// Figures works out a window's energy (J), busy time (s), peak memory
// (bytes) and mean SM and tensor activity (fractions).
// overlapping, when not nil, gives the windows on a GPU that share it with
// the request's (the request's own first).
func Figures(s gpucost.Sampler, req Request, overlapping func(g *gpucost.Series, maxGap time.Duration) []gpucost.Window) Result {
	var out Result
	series := s.Samples(req.Window.From, req.Window.To)
	if len(series) == 0 {
		for i := range out.Reasons {
			out.Reasons[i] = SkipReason(gpucost.NoSamples)
		}
		return out
	}
	maxGap := s.MaxGap()
	pid, hasPID := req.PID, req.HasPID
	gpus := PickGPUs(series, req.Hint, pid, hasPID, req.Window, maxGap)
	if gpus == nil {
		for i := range out.Reasons {
			out.Reasons[i] = SkipGPUNotFound
		}
		return out
	}
	activityFigures(&out, gpus, req.Window, maxGap)
	for _, g := range gpus {
		out.GPUs = append(out.GPUs, g.UUID)
		out.NotYet = out.NotYet || endsBefore(g, req.Window.To)
		windows := []gpucost.Window{req.Window}
		if overlapping != nil {
			windows = overlapping(g, maxGap)
		}
		for i, figure := range [2]func(gpucost.Window) (float64, gpucost.Reason){
			func(x gpucost.Window) (float64, gpucost.Reason) { return gpucost.Energy(g.Energy, g.Power, x, maxGap) },
			func(x gpucost.Window) (float64, gpucost.Reason) { return gpucost.BusyTime(g.Util, x, maxGap) },
		} {
			sh := gpucost.Share(windows, figure)[0]
			if sh.Reason != gpucost.Covered && out.Reasons[i] == Covered {
				out.Reasons[i] = SkipReason(sh.Reason)
			}
			out.Vals[i] += sh.Value
			out.Overlapped = out.Overlapped || sh.Overlapped > 0
		}
	}
	for i := range 2 {
		if out.Reasons[i] != Covered {
			out.Vals[i] = 0
		}
	}
	if !hasPID {
		out.Reasons[FigureMemory] = SkipNoPID
		return out
	}
	found := false
	for _, g := range gpus {
		p, ok, r := gpucost.PeakMemory(g.Memory, pid, req.Window, maxGap)
		if r != gpucost.Covered {
			out.Reasons[FigureMemory] = SkipReason(r)
			return out
		}
		if ok {
			out.Vals[FigureMemory] += float64(p) // on several GPUs: the sum of each GPU's peak
			found = true
		}
	}
	if !found {
		out.Reasons[FigureMemory] = SkipProcessNotOnGPU
	}
	return out
}

// activityFigures works out the mean SM and tensor activity of w: each
// GPU's time-weighted mean of its GPM periods over w; on several GPUs, the
// mean of theirs. A mean is not additive, so runs sharing a GPU each get
// the GPU's activity over their own window, not a split of it. Any GPU of
// the run without GPM: no figure (no_gpm).
func activityFigures(out *Result, gpus []*gpucost.Series, w gpucost.Window, maxGap time.Duration) {
	for i, pick := range [2]func(*gpucost.Series) []gpucost.UtilSample{
		func(s *gpucost.Series) []gpucost.UtilSample { return s.SMActivity },
		func(s *gpucost.Series) []gpucost.UtilSample { return s.TensorActivity },
	} {
		f := FigureSMActivity + Figure(i)
		var sum float64
		for _, g := range gpus {
			if !g.GPM {
				out.Reasons[f] = SkipNoGPM
				break
			}
			m, r := gpucost.MeanActivity(pick(g), w, maxGap)
			if r != gpucost.Covered {
				out.Reasons[f] = SkipReason(r)
				break
			}
			sum += m
		}
		if out.Reasons[f] == Covered {
			out.Vals[f] = sum / float64(len(gpus))
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

// PickGPUs chooses the GPUs a run used: the one its records name; else
// those where the service's process held memory during the run; else
// every GPU. nil: the named GPU is not among the sampler's.
func PickGPUs(series []gpucost.Series, hint Hint, pid uint32, hasPID bool, w gpucost.Window, maxGap time.Duration) []*gpucost.Series {
	if !hint.None() {
		for i := range series {
			if hint.Matches(&series[i]) {
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
