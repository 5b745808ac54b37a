// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package gpucost // import "github.com/gpubuild/otelcol-gpubuild/internal/gpucost"

import (
	"sort"
	"time"
)

// PowerSample is a point on the GPU's power curve: the driver's power
// readings (NVML_TOTAL_POWER_SAMPLES, about every 20 ms) integrated up to T.
// The energy counter is the truth and is read once per sampling; the curve
// only says where inside a sampling gap that energy was spent, so that a
// load that starts or stops between two counter reads is not smeared over
// the gap.
type PowerSample struct {
	T      time.Time
	Joules float64 // the integral of the readings up to T, from an arbitrary origin
}

// MaxPowerGap is the longest time between two consecutive points of the
// curve that is still a continuous curve; a longer one is a hole (the
// driver's buffer of readings overflowed, the GPU was lost), and a counter
// gap across it is interpolated linearly.
const MaxPowerGap = 500 * time.Millisecond

// powerEdge is how far beyond its first or last point the curve is
// extended at the newest reading's power: the counter is read a moment
// after the driver's newest power reading.
const powerEdge = 100 * time.Millisecond

// shapedFraction returns how much of the energy spent between a and b was
// spent by t (a <= t <= b), from the power curve; ok is false when the
// curve does not cover [a, b] without a hole or spends nothing in it.
func shapedFraction(power []PowerSample, a, t, b time.Time) (float64, bool) {
	ja, ok := joulesAt(power, a)
	if !ok {
		return 0, false
	}
	jt, ok := joulesAt(power, t)
	if !ok {
		return 0, false
	}
	jb, ok := joulesAt(power, b)
	if !ok || jb <= ja {
		return 0, false
	}
	// No hole between a and b.
	lo := sort.Search(len(power), func(k int) bool { return power[k].T.After(a) })
	for k := max(lo, 1); k < len(power) && !power[k-1].T.After(b); k++ {
		if power[k].T.Sub(power[k-1].T) > MaxPowerGap {
			return 0, false
		}
	}
	return (jt - ja) / (jb - ja), true
}

// joulesAt interpolates the curve at t, extending it by up to powerEdge at
// either end at the power of its nearest segment.
func joulesAt(power []PowerSample, t time.Time) (float64, bool) {
	n := len(power)
	if n < 2 {
		return 0, false
	}
	j := sort.Search(n, func(k int) bool { return !power[k].T.Before(t) })
	switch j {
	case 0:
		if power[0].T.Sub(t) > powerEdge {
			return 0, false
		}
		j = 1
	case n:
		if t.Sub(power[n-1].T) > powerEdge {
			return 0, false
		}
		j = n - 1
	}
	a, b := power[j-1], power[j]
	span := b.T.Sub(a.T)
	if span <= 0 {
		return 0, false
	}
	return a.Joules + float64(t.Sub(a.T))/float64(span)*(b.Joules-a.Joules), true
}
