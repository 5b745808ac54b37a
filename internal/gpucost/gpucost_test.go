// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package gpucost

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

func at(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }

func win(a, b float64) Window { return Window{From: at(a), To: at(b)} }

// The hand-computed scenario: 200 W in the first second, 300 W in the
// second, 100 W in the third.
func energySamples() []EnergySample {
	return []EnergySample{{at(0), 1000}, {at(1), 1200}, {at(2), 1500}, {at(3), 1600}}
}

// Utilization: 40 % in (0,1], 80 % in (1,2], 10 % in (2,3]; the first
// sample's value belongs to a period before the ring.
func utilSamples() []UtilSample {
	return []UtilSample{{at(0), 50}, {at(1), 40}, {at(2), 80}, {at(3), 10}}
}

func near(t *testing.T, want, got float64) {
	t.Helper()
	assert.LessOrEqual(t, math.Abs(got-want), 1e-6*math.Abs(want), "want %v, got %v", want, got)
}

func TestEnergyInterpolatesBetweenSamples(t *testing.T) {
	// E(0.5 s) = 1000 + 0.5*200 = 1100 mJ; E(2.25 s) = 1500 + 0.25*100 = 1525 mJ.
	j, r := Energy(energySamples(), nil, win(0.5, 2.25), time.Second)
	require.Equal(t, Covered, r)
	near(t, 0.425, j)
	// On sample boundaries: exactly the counter difference.
	j, r = Energy(energySamples(), nil, win(0, 3), time.Second)
	require.Equal(t, Covered, r)
	near(t, 0.6, j)
}

func TestEnergyRefusesWhatIsNotCovered(t *testing.T) {
	for name, tc := range map[string]struct {
		samples []EnergySample
		w       Window
		maxGap  time.Duration
		want    Reason
	}{
		"starts before the first sample": {energySamples(), win(-0.5, 1), time.Second, NotCovered},
		"ends after the last sample":     {energySamples(), win(2, 3.5), time.Second, NotCovered},
		"no samples":                     {nil, win(0, 1), time.Second, NoSamples},
		"gap inside":                     {energySamples(), win(0.5, 2.25), 500 * time.Millisecond, Gap},
		"counter reset": {[]EnergySample{{at(0), 1000}, {at(1), 10}, {at(2), 20}},
			win(0.5, 1.5), time.Second, CounterReset},
		"ends before it starts": {energySamples(), win(2, 1), time.Second, EmptyWindow},
	} {
		t.Run(name, func(t *testing.T) {
			j, r := Energy(tc.samples, nil, tc.w, tc.maxGap)
			assert.Equal(t, tc.want, r)
			assert.Zero(t, j)
		})
	}
	// A gap outside the window does not matter.
	s := append(energySamples(), EnergySample{at(10), 2000})
	_, r := Energy(s, nil, win(0.5, 2.25), 1500*time.Millisecond)
	assert.Equal(t, Covered, r)
}

func TestBusyTimeIntegratesSamplePeriods(t *testing.T) {
	// 0.5 s at 40 % + 1 s at 80 % + 0.25 s at 10 % = 1.025 s.
	s, r := BusyTime(utilSamples(), win(0.5, 2.25), time.Second)
	require.Equal(t, Covered, r)
	near(t, 1.025, s)
	s, r = BusyTime(utilSamples(), win(0, 3), time.Second)
	require.Equal(t, Covered, r)
	near(t, 1.3, s)
	_, r = BusyTime(utilSamples(), win(-1, 2), time.Second)
	assert.Equal(t, NotCovered, r)
	_, r = BusyTime(utilSamples(), win(1, 3.1), time.Second)
	assert.Equal(t, NotCovered, r)
	_, r = BusyTime(utilSamples(), win(0.5, 1.5), 900*time.Millisecond)
	assert.Equal(t, Gap, r)
}

func TestPeakMemoryOfOneProcess(t *testing.T) {
	s := []MemSample{
		{at(0), []ProcMem{{7, 100}}},
		{at(1), []ProcMem{{7, 300}, {8, 5}, {7, 50}}}, // two MIG instances: 350
		{at(2), []ProcMem{{8, 999}}},
		{at(3), []ProcMem{{7, 200}}},
	}
	peak, found, r := PeakMemory(s, 7, win(0.5, 2.25), time.Second)
	require.Equal(t, Covered, r)
	assert.True(t, found)
	assert.Equal(t, uint64(350), peak)
	// The sample before the window counts: what it held at the start.
	peak, found, r = PeakMemory(s, 7, win(0.2, 0.8), time.Second)
	require.Equal(t, Covered, r)
	assert.True(t, found)
	assert.Equal(t, uint64(100), peak)
	_, found, r = PeakMemory(s, 9, win(0, 3), time.Second)
	require.Equal(t, Covered, r)
	assert.False(t, found)
	_, _, r = PeakMemory(s, 7, win(2.5, 3.5), time.Second)
	assert.Equal(t, NotCovered, r)
}

func TestShareSplitsOverlapsEvenly(t *testing.T) {
	energy := func(w Window) (float64, Reason) { return Energy(energySamples(), nil, w, time.Second) }
	// A [0,2], B [1,3]: (0,1] 0.2 J to A; (1,2] 0.3 J halved; (2,3] 0.1 J to B.
	got := Share([]Window{win(0, 2), win(1, 3)}, energy)
	require.Len(t, got, 2)
	require.Equal(t, Covered, got[0].Reason)
	require.Equal(t, Covered, got[1].Reason)
	near(t, 0.35, got[0].Value)
	near(t, 0.25, got[1].Value)
	near(t, 0.6, got[0].Value+got[1].Value) // the union's energy, once
	assert.Equal(t, time.Second, got[0].Overlapped)
	assert.Equal(t, time.Second, got[1].Overlapped)

	// Three windows, one inside the others: (0.5,1] is open in A and C,
	// (1,1.5] in all three.
	busy := func(w Window) (float64, Reason) { return BusyTime(utilSamples(), w, time.Second) }
	got = Share([]Window{win(0, 2), win(1, 1.5), win(0.5, 3)}, busy)
	// A: 0.5*0.4 + 0.5*0.4/2 + 0.5*0.8/3 + 0.5*0.8/2 = 0.2+0.1+0.1333333+0.2
	near(t, 0.2+0.1+0.4/3+0.2, got[0].Value)
	near(t, 0.4/3, got[1].Value)
	// C: 0.1 + 0.4/3 + 0.2 + 0.1
	near(t, 0.1+0.4/3+0.2+0.1, got[2].Value)
	near(t, 1.3, got[0].Value+got[1].Value+got[2].Value)
	assert.Equal(t, 1500*time.Millisecond, got[0].Overlapped)
	assert.Equal(t, 500*time.Millisecond, got[1].Overlapped)
	assert.Equal(t, 1500*time.Millisecond, got[2].Overlapped) // with A until 2 s

	// A window partly outside the samples gets nothing; the other keeps
	// its half of what they shared.
	got = Share([]Window{win(0, 2), win(1, 4)}, energy)
	near(t, 0.35, got[0].Value)
	assert.Equal(t, NotCovered, got[1].Reason)
	assert.Zero(t, got[1].Value)
}

// activitySamples: SM activity periods (0 s, 1 s] at 40 %, (1 s, 3 s] at
// 90 %, (3 s, 4 s] at 10 %; the first sample only opens.
func activitySamples() []UtilSample {
	return []UtilSample{{at(0), math.NaN()}, {at(1), 40}, {at(3), 90}, {at(4), 10}}
}

func TestMeanActivityIsTimeWeighted(t *testing.T) {
	// [0.5 s, 3.5 s]: 0.5 s at 40 %, 2 s at 90 %, 0.5 s at 10 %, over 3 s.
	m, r := MeanActivity(activitySamples(), win(0.5, 3.5), 2*time.Second)
	require.Equal(t, Covered, r)
	near(t, (0.5*0.40+2*0.90+0.5*0.10)/3, m)
	// Inside one period: that period's figure.
	m, r = MeanActivity(activitySamples(), win(1.5, 2.5), 2*time.Second)
	require.Equal(t, Covered, r)
	near(t, 0.90, m)
	// No length: the period it lies in; on a boundary, the period it ends.
	m, r = MeanActivity(activitySamples(), win(2, 2), 2*time.Second)
	require.Equal(t, Covered, r)
	near(t, 0.90, m)
	m, r = MeanActivity(activitySamples(), win(1, 1), 2*time.Second)
	require.Equal(t, Covered, r)
	near(t, 0.40, m)
}

func TestMeanActivityHasNoFigureWithoutCoverage(t *testing.T) {
	_, r := MeanActivity(nil, win(0, 1), time.Second)
	assert.Equal(t, NoSamples, r)
	_, r = MeanActivity(activitySamples(), win(0.5, 4.5), 2*time.Second)
	assert.Equal(t, NotCovered, r)
	_, r = MeanActivity(activitySamples(), win(0.5, 3.5), time.Second+time.Second/2)
	assert.Equal(t, Gap, r, "the 2 s period is longer than the allowed gap")
	// A break: the period a NaN sample ends has no figure.
	s := []UtilSample{{at(0), math.NaN()}, {at(1), 40}, {at(2), math.NaN()}, {at(3), 50}}
	_, r = MeanActivity(s, win(0.5, 2.5), 2*time.Second)
	assert.Equal(t, Gap, r)
	m, r := MeanActivity(s, win(2.25, 2.75), 2*time.Second)
	require.Equal(t, Covered, r)
	near(t, 0.50, m)
	_, r = MeanActivity(s, win(2, 1), time.Second)
	assert.Equal(t, EmptyWindow, r)
}
