// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package gpucost turns GPU samples into what one build run cost on a GPU:
// energy from the energy counter interpolated at the run's start and end
// (along the driver's power readings between two counter reads),
// busy time from the driver's utilization samples integrated over the
// run's window, and the peak memory of one process. It is pure arithmetic;
// the nvml_sampler extension provides the samples.
//
// A window not covered by samples gets no figure and a Reason, never a
// guess.
package gpucost // import "github.com/gpubuild/otelcol-gpubuild/internal/gpucost"

import (
	"math"
	"sort"
	"time"
)

// EnergySample is the GPU's energy counter (NVML: millijoules since the
// driver loaded) read at T.
type EnergySample struct {
	T           time.Time
	MilliJoules float64
}

// UtilSample is the GPU's utilization in percent over the period that ends
// at T and begins at the previous sample's T (how NVML's
// nvmlDeviceGetSamples reports it).
type UtilSample struct {
	T       time.Time
	Percent float64
}

// ProcMem is the GPU memory one process holds.
type ProcMem struct {
	PID   uint32
	Bytes uint64
}

// MemSample is the GPU's process list read at T.
type MemSample struct {
	T     time.Time
	Procs []ProcMem
}

// Window is a run's (or a stage's) time on a GPU.
type Window struct {
	From, To time.Time
}

// Seconds is the window's length.
func (w Window) Seconds() float64 { return w.To.Sub(w.From).Seconds() }

// Reason says why a window has no figure.
type Reason int

const (
	// Covered means the figure is exact to the samples.
	Covered Reason = iota
	// NoSamples means there are no samples at all (NVML absent, no GPU).
	NoSamples
	// NotCovered means the samples begin after the window's start or end
	// before its end (the sidecar started during the run).
	NotCovered
	// Gap means two consecutive samples inside the window are further apart
	// than the allowed gap (the sidecar or the GPU stopped answering).
	Gap
	// CounterReset means the energy counter went down inside the window (the
	// driver reloaded).
	CounterReset
	// EmptyWindow means the window ends before it starts.
	EmptyWindow
	// NumReasons is how many reasons there are.
	NumReasons
)

func (r Reason) String() string {
	switch r {
	case Covered:
		return "covered"
	case NoSamples:
		return "no_samples"
	case NotCovered:
		return "window_not_covered"
	case Gap:
		return "sample_gap"
	case CounterReset:
		return "counter_reset"
	case EmptyWindow:
		return "empty_window"
	}
	return "unknown"
}

// Energy returns the joules the GPU used in w: the energy counter
// interpolated at w.From and w.To between the counter reads around them,
// along the power curve where it covers the gap between the reads, else
// linearly. samples and power must be sorted by T; power may be empty.
func Energy(samples []EnergySample, power []PowerSample, w Window, maxGap time.Duration) (float64, Reason) {
	if r := checkWindow(len(samples), w); r != Covered {
		return 0, r
	}
	first, last := samples[0].T, samples[len(samples)-1].T
	if first.After(w.From) || last.Before(w.To) {
		return 0, NotCovered
	}
	// i: the last sample at or before From.
	i := sort.Search(len(samples), func(k int) bool { return samples[k].T.After(w.From) }) - 1
	for k := i + 1; k < len(samples) && !samples[k-1].T.After(w.To); k++ {
		if samples[k].T.Sub(samples[k-1].T) > maxGap {
			return 0, Gap
		}
		if samples[k].MilliJoules < samples[k-1].MilliJoules {
			return 0, CounterReset
		}
	}
	return (energyAt(samples, power, w.To) - energyAt(samples, power, w.From)) / 1000, Covered
}

// energyAt interpolates the counter at t, within the samples' span.
func energyAt(samples []EnergySample, power []PowerSample, t time.Time) float64 {
	j := sort.Search(len(samples), func(k int) bool { return !samples[k].T.Before(t) })
	if j == 0 {
		return samples[0].MilliJoules
	}
	a, b := samples[j-1], samples[j]
	span := b.T.Sub(a.T)
	if span <= 0 {
		return b.MilliJoules
	}
	frac, ok := shapedFraction(power, a.T, t, b.T)
	if !ok {
		frac = float64(t.Sub(a.T)) / float64(span)
	}
	return a.MilliJoules + frac*(b.MilliJoules-a.MilliJoules)
}

// BusyTime returns the seconds the GPU was busy in w: each utilization
// sample's percent times the part of its period inside w. The first
// sample only opens the first period. samples must be sorted by T.
func BusyTime(samples []UtilSample, w Window, maxGap time.Duration) (float64, Reason) {
	if r := checkWindow(len(samples), w); r != Covered {
		return 0, r
	}
	if samples[0].T.After(w.From) || samples[len(samples)-1].T.Before(w.To) {
		return 0, NotCovered
	}
	return integrate(samples, w, maxGap)
}

// integrate is the sum over the sample periods overlapping w of each
// period's percent / 100 times the part of it inside w, in seconds; Gap
// when one of them is longer than maxGap or has no figure (NaN).
func integrate(samples []UtilSample, w Window, maxGap time.Duration) (float64, Reason) {
	var sum float64
	for k := 1; k < len(samples); k++ {
		a, b := samples[k-1].T, samples[k].T
		if !b.After(w.From) {
			continue
		}
		if !a.Before(w.To) {
			break
		}
		if b.Sub(a) > maxGap || math.IsNaN(samples[k].Percent) {
			return 0, Gap
		}
		lo, hi := maxTime(a, w.From), minTime(b, w.To)
		sum += samples[k].Percent / 100 * hi.Sub(lo).Seconds()
	}
	return sum, Covered
}

// MeanActivity returns the time-weighted mean of activity samples (GPM SM
// or tensor activity, in percent) over w, as a fraction: each sample's
// percent weighted by the part of its period inside w, divided by w's
// length. Periods are as in UtilSample; a sample whose Percent is NaN
// opens a period after a break (the first sampling, a GPU found again)
// and the period it ends has no figure: a window across it gets Gap. A
// window of no length takes the period it lies in. samples must be sorted
// by T.
func MeanActivity(samples []UtilSample, w Window, maxGap time.Duration) (float64, Reason) {
	if r := checkWindow(len(samples), w); r != Covered {
		return 0, r
	}
	if samples[0].T.After(w.From) || samples[len(samples)-1].T.Before(w.To) {
		return 0, NotCovered
	}
	if w.From.Equal(w.To) {
		k := max(sort.Search(len(samples), func(i int) bool { return !samples[i].T.Before(w.From) }), 1)
		if k >= len(samples) {
			return 0, NotCovered
		}
		if samples[k].T.Sub(samples[k-1].T) > maxGap || math.IsNaN(samples[k].Percent) {
			return 0, Gap
		}
		return samples[k].Percent / 100, Covered
	}
	sum, r := integrate(samples, w, maxGap)
	if r != Covered {
		return 0, r
	}
	return sum / w.Seconds(), Covered
}

// PeakMemory returns the most GPU memory pid held in w: the largest sum of
// its entries (a process may hold memory in several MIG instances) over
// the samples in w and the last one before w (what it held at the start).
// found is false when pid holds no memory in any of them.
func PeakMemory(samples []MemSample, pid uint32, w Window, maxGap time.Duration) (peak uint64, found bool, r Reason) {
	if r := checkWindow(len(samples), w); r != Covered {
		return 0, false, r
	}
	if samples[0].T.After(w.From) || samples[len(samples)-1].T.Before(w.To) {
		return 0, false, NotCovered
	}
	i := sort.Search(len(samples), func(k int) bool { return samples[k].T.After(w.From) }) - 1
	for k := i; k < len(samples) && !samples[k].T.After(w.To); k++ {
		if k > i && samples[k].T.Sub(samples[k-1].T) > maxGap {
			return 0, false, Gap
		}
		var sum uint64
		held := false
		for _, p := range samples[k].Procs {
			if p.PID == pid {
				sum += p.Bytes
				held = true
			}
		}
		if held {
			found = true
			peak = max(peak, sum)
		}
	}
	return peak, found, Covered
}

func checkWindow(n int, w Window) Reason {
	if w.To.Before(w.From) {
		return EmptyWindow
	}
	if n == 0 {
		return NoSamples
	}
	return Covered
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
