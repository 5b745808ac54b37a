// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package gpucost

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// stepCurve is a power curve every 100 ms over [0, 1 s]: idle until 0.6 s,
// then loaded, from an arbitrary origin and scale (the curve only places
// the counter's energy).
func stepCurve(idle, load, scale, origin float64) []PowerSample {
	var out []PowerSample
	j := origin
	for k := 0; k <= 10; k++ {
		out = append(out, PowerSample{T: at(float64(k) / 10), Joules: j})
		w := idle
		if k >= 6 {
			w = load
		}
		j += scale * w * 0.1
	}
	return out
}

func TestEnergyFollowsThePowerCurveInsideAGap(t *testing.T) {
	// The counter is read at 0 s and 1 s; the GPU draws 100 W until 0.6 s
	// and 700 W after: 60 + 280 = 340 J between the reads.
	counter := []EnergySample{{at(0), 5_000}, {at(1), 345_000}}
	// The curve's own scale and origin do not matter: it only says where
	// in the gap the counter's energy was spent.
	for _, curve := range [][]PowerSample{stepCurve(100, 700, 1, 0), stepCurve(100, 700, 0.9, 12_345)} {
		j, r := Energy(counter, curve, win(0.6, 1), time.Second)
		require.Equal(t, Covered, r)
		near(t, 280, j)
		// 0.3 s at 100 W and 0.2 s at 700 W.
		j, r = Energy(counter, curve, win(0.3, 0.8), time.Second)
		require.Equal(t, Covered, r)
		near(t, 170, j)
		j, r = Energy(counter, curve, win(0, 1), time.Second)
		require.Equal(t, Covered, r)
		near(t, 340, j)
	}
	// Without a curve the same window is smeared: 0.4 of 340 J.
	j, r := Energy(counter, nil, win(0.6, 1), time.Second)
	require.Equal(t, Covered, r)
	near(t, 136, j)
}

func TestEnergyIsLinearWhereTheCurveHasAHole(t *testing.T) {
	counter := []EnergySample{{at(0), 5_000}, {at(1), 345_000}}
	curve := stepCurve(100, 700, 1, 0)
	holed := append(append([]PowerSample{}, curve[:3]...), curve[9:]...) // 0.2 s to 0.9 s missing
	j, r := Energy(counter, holed, win(0.6, 1), time.Second)
	require.Equal(t, Covered, r)
	near(t, 136, j)
	// A curve that ends well before the counter read does not cover it.
	j, r = Energy(counter, curve[:8], win(0.6, 1), time.Second)
	require.Equal(t, Covered, r)
	near(t, 136, j)
}

func TestEnergyCurveExtendsToACounterReadJustAfterIt(t *testing.T) {
	// The counter is read 50 ms after the curve's last point (the newest
	// power reading): the curve is extended at its last segment's power.
	counter := []EnergySample{{at(0), 0}, {at(1.05), 375_000}} // 340 J + 0.05 s at 700 W
	j, r := Energy(counter, stepCurve(100, 700, 1, 0), win(0.6, 1.05), 2*time.Second)
	require.Equal(t, Covered, r)
	near(t, 315, j)
}
