// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"math"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
)

// The spread of a figure over rounds, and whether a ratio between two
// builds holds against it: on a shared machine a median alone says little.

// spread is a median and the range of the values it is the median of.
type spread struct{ med, lo, hi float64 }

// spreadOf is the median, lowest and highest of v, NaN values left out
// (all NaN for none).
func spreadOf(v []float64) spread {
	v = slices.DeleteFunc(slices.Clone(v), math.IsNaN)
	if len(v) == 0 {
		return spread{math.NaN(), math.NaN(), math.NaN()}
	}
	return spread{median(v), slices.Min(v), slices.Max(v)}
}

// format writes the median, and the range beside it when the values
// differ in format's precision: "0.123 (0.110–0.140)".
func (s spread) format(format string) string {
	m, lo, hi := fmt.Sprintf(format, s.med), fmt.Sprintf(format, s.lo), fmt.Sprintf(format, s.hi)
	if lo == hi {
		return m
	}
	return fmt.Sprintf("%s (%s–%s)", m, lo, hi)
}

// pairedRatios divides a's value of each round by b's of the same round:
// the two builds ran next to each other in time, so drift of the machine
// between rounds falls out of each ratio.
func pairedRatios(a, b []float64) []float64 {
	out := make([]float64, 0, min(len(a), len(b)))
	for i := range min(len(a), len(b)) {
		if b[i] > 0 && !math.IsNaN(a[i]) {
			out = append(out, a[i]/b[i])
		}
	}
	return out
}

// ratioCell writes the median of the rounds' ratios with their range, and
// says "within noise" when that range reaches 1 (the builds cannot be told
// apart) or the goal, when there is one (0: none): the ratio may fall on
// either side of it in another run.
func ratioCell(r []float64, goal float64) string {
	s := spreadOf(r)
	if math.IsNaN(s.med) {
		return "–"
	}
	cell := s.format("%.2f") + "×"
	var near []string
	if len(r) > 1 && s.lo <= 1 && 1 <= s.hi {
		near = append(near, "1")
	}
	if len(r) > 1 && goal > 0 && s.lo <= goal && goal <= s.hi {
		near = append(near, strconv.FormatFloat(goal, 'f', -1, 64)+"×")
	}
	if len(near) > 0 {
		cell += ", within noise of " + strings.Join(near, " and ")
	}
	return cell
}

// pinCPU is the CPU list every collector under measurement is pinned to
// (taskset -c), from the -pin flag: "auto" pins to the last CPU where
// taskset exists and there are two CPUs or more, so that every build runs
// on the same one core (the harness, its load generator and endpoints are
// not pinned), "off" pins nothing, anything else is taken as taskset's
// list.
func pinCPU(flag string) string {
	switch flag {
	case "off", "":
		return ""
	case "auto":
		if _, err := exec.LookPath("taskset"); err != nil || runtime.NumCPU() < 2 {
			return ""
		}
		return strconv.Itoa(runtime.NumCPU() - 1)
	}
	return flag
}
