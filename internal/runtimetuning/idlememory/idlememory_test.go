// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package idlememory

import (
	"context"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const mib = 1 << 20

func testConfig() Config {
	return Config{Every: time.Second, Quiet: 2, QuietBytes: 512 << 10, MinBytes: 4 * mib}
}

// steps feeds samples allocating the given bytes each, with reclaimable
// memory as given, and returns the decisions.
func steps(d *Decider, start uint64, perStep []uint64, reclaimable uint64) []bool {
	var out []bool
	allocated := start
	for _, a := range perStep {
		allocated += a
		out = append(out, d.Release(Sample{Allocated: allocated, Reclaimable: reclaimable}))
	}
	return out
}

func TestReleaseAfterQuietSamples(t *testing.T) {
	d := NewDecider(testConfig())
	// The first sample is a reference only; then a burst, then quiet.
	got := steps(d, 0, []uint64{0, 30 * mib, 100 << 10, 0, 0, 0, 0}, 20*mib)
	assert.Equal(t, []bool{false, false, false, true, false, true, false}, got,
		"given back after two quiet samples, then again only after two more")
}

// While no burst comes, each release needs twice the quiet samples of the
// previous one, up to MaxQuiet; a burst brings it back to Quiet.
func TestQuietProcessIsCollectedLessOften(t *testing.T) {
	cfg := testConfig()
	cfg.MaxQuiet = 8
	d := NewDecider(cfg)
	quiet := make([]uint64, 1+2+4+8+8)
	got := steps(d, 0, quiet, 20*mib)
	var releases []int
	for i, r := range got {
		if r {
			releases = append(releases, i)
		}
	}
	assert.Equal(t, []int{2, 6, 14, 22}, releases, "after 2, 4, 8, then 8 quiet samples")

	got = steps(d, 100*mib, []uint64{30 * mib, 0, 0}, 20*mib)
	assert.Equal(t, []bool{false, false, true}, got, "after a burst, two quiet samples again")
}

func TestNoReleaseWhileAllocating(t *testing.T) {
	d := NewDecider(testConfig())
	// A steady load above the quiet rate never counts as quiet.
	got := steps(d, 0, []uint64{0, mib, mib, mib, mib, mib, mib}, 20*mib)
	assert.Equal(t, make([]bool, 7), got)
}

func TestBurstRestartsTheQuietCount(t *testing.T) {
	d := NewDecider(testConfig())
	got := steps(d, 0, []uint64{0, 0, 5 * mib, 0, 0}, 20*mib)
	assert.Equal(t, []bool{false, false, false, false, true}, got)
}

func TestNothingWorthGivingBack(t *testing.T) {
	d := NewDecider(testConfig())
	got := steps(d, 0, []uint64{0, 0, 0, 0, 0}, 4*mib-1)
	assert.Equal(t, make([]bool, 5), got, "under MinBytes a collection is not worth it")
}

// timed feeds samples taken when the decider's Wait says, each allocating
// the bytes given, and returns the waits after each.
func timed(d *Decider, perStep []uint64, reclaimable uint64) []time.Duration {
	var out []time.Duration
	at, allocated := time.Unix(0, 0), uint64(0)
	for _, a := range perStep {
		allocated += a
		d.Release(Sample{At: at, Allocated: allocated, Reclaimable: reclaimable})
		out = append(out, d.Wait())
		at = at.Add(d.Wait())
	}
	return out
}

// A quiet process is sampled less and less often, down to MaxEvery; a
// sample that sees a burst brings the interval back to Every.
func TestQuietProcessIsSampledLessOften(t *testing.T) {
	cfg := testConfig()
	cfg.MaxEvery = 8 * time.Second
	cfg.MaxEveryReleased = time.Minute // nothing is given back here: not used
	d := NewDecider(cfg)
	got := timed(d, []uint64{0, 0, 0, 0, 0, 0, 0, 20 * mib, 0, 0, 0}, 0)
	s := time.Second
	assert.Equal(t, []time.Duration{s, s, 2 * s, 4 * s, 8 * s, 8 * s, 8 * s, s, s, 2 * s, 4 * s}, got)
}

// The quiet threshold is a rate: 3 MiB over an 8 s sample (384 KiB a
// second) is quiet, and given back; 5 MiB (640 KiB a second) is a burst.
func TestQuietThresholdScalesWithTheInterval(t *testing.T) {
	cfg := testConfig()
	cfg.MaxEvery = 8 * time.Second
	at := func(s int) time.Time { return time.Unix(int64(s), 0) }
	d := NewDecider(cfg)
	assert.False(t, d.Release(Sample{At: at(0), Reclaimable: 20 * mib}))
	assert.False(t, d.Release(Sample{At: at(1), Reclaimable: 20 * mib}))
	assert.True(t, d.Release(Sample{At: at(2), Reclaimable: 20 * mib}), "released after two quiet samples")
	assert.False(t, d.Release(Sample{At: at(10), Allocated: 3 * mib, Reclaimable: 20 * mib}))
	assert.True(t, d.Release(Sample{At: at(18), Allocated: 6 * mib, Reclaimable: 20 * mib}), "3 MiB in 8 s is quiet")
	assert.Equal(t, 8*time.Second, d.Wait())
	assert.False(t, d.Release(Sample{At: at(26), Allocated: 11 * mib, Reclaimable: 20 * mib}), "5 MiB in 8 s is not")
	assert.Equal(t, time.Second, d.Wait())
}

// Once the heap was given back, a process that stays quiet is sampled
// less often still, down to MaxEveryReleased; a burst brings it back to
// Every and the next release to Quiet samples.
func TestReleasedProcessIsSampledLessOftenStill(t *testing.T) {
	cfg := testConfig()
	cfg.MaxEvery = 8 * time.Second
	cfg.MaxEveryReleased = 64 * time.Second
	d := NewDecider(cfg)
	got := timed(d, []uint64{0, 0, 0, 0, 0, 0, 0, 0, 0, 20 * mib, 0, 0}, 20*mib)
	s := time.Second
	assert.Equal(t, []time.Duration{s, s, 2 * s, 4 * s, 8 * s, 16 * s, 32 * s, 64 * s, 64 * s, s, s, 2 * s}, got)
}

// A process working in regular bursts (10 MiB every 10 s) gives its heap
// back once between two bursts and is never sampled less often than
// MaxEvery: a longer interval would leave a burst's heap resident past the
// next burst.
func TestRegularBurstsKeepTheShortInterval(t *testing.T) {
	cfg := testConfig()
	cfg.MaxEvery = 8 * time.Second
	cfg.MaxEveryReleased = 64 * time.Second
	cfg.MaxQuiet = 16
	d := NewDecider(cfg)
	at, allocated := time.Unix(0, 0), uint64(0)
	nextBurst, releases := at, 0
	for at.Before(time.Unix(600, 0)) {
		if !at.Before(nextBurst) {
			allocated += 10 * mib
			nextBurst = nextBurst.Add(10 * time.Second)
		}
		if d.Release(Sample{At: at, Allocated: allocated, Reclaimable: 20 * mib}) {
			releases++
		}
		require.LessOrEqual(t, d.Wait(), cfg.MaxEvery, "at %v", at)
		at = at.Add(d.Wait())
	}
	assert.GreaterOrEqual(t, releases, 20, "the heap is given back between most bursts")
}

// After a long interval the quiet threshold is MaxEvery's share, not the
// interval's: 5 MiB over 64 s is a burst, given back two quiet samples
// later; 3 MiB is quiet.
func TestLongIntervalDoesNotHideABurst(t *testing.T) {
	cfg := testConfig()
	cfg.MaxEvery = 8 * time.Second
	cfg.MaxEveryReleased = 64 * time.Second
	at := func(s int) time.Time { return time.Unix(int64(s), 0) }
	d := NewDecider(cfg)
	d.Release(Sample{At: at(0), Reclaimable: 20 * mib})
	d.Release(Sample{At: at(1), Reclaimable: 20 * mib})
	require.True(t, d.Release(Sample{At: at(2), Reclaimable: 20 * mib}))
	assert.False(t, d.Release(Sample{At: at(66), Allocated: 3 * mib, Reclaimable: 20 * mib}), "3 MiB in 64 s is quiet")
	assert.False(t, d.Release(Sample{At: at(130), Allocated: 8 * mib, Reclaimable: 20 * mib}), "5 MiB in 64 s is a burst")
	assert.Equal(t, time.Second, d.Wait())
	assert.False(t, d.Release(Sample{At: at(131), Allocated: 8 * mib, Reclaimable: 20 * mib}))
	assert.True(t, d.Release(Sample{At: at(132), Allocated: 8 * mib, Reclaimable: 20 * mib}), "given back two quiet seconds later")
}

// Without MaxEvery the interval stays Every.
func TestNoBackOffWithoutMaxEvery(t *testing.T) {
	got := timed(NewDecider(testConfig()), []uint64{0, 0, 0, 0}, 0)
	assert.Equal(t, []time.Duration{time.Second, time.Second, time.Second, time.Second}, got)
}

// allocateGarbage allocates n blocks of size bytes that are garbage once it
// returns.
//
//go:noinline
func allocateGarbage(n, size int) {
	blocks := make([][]byte, 0, n)
	for range n {
		blocks = append(blocks, make([]byte, size))
	}
	runtime.KeepAlive(blocks)
}

// The reader sees garbage as reclaimable, and Run gives it back: with the
// collector off, only Run's forced collection can free it.
func TestRunGivesGarbageBack(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	runtime.GC()
	r := newReader()
	before := r.read()

	allocateGarbage(64, 512<<10)
	s := r.read()
	require.GreaterOrEqual(t, s.Reclaimable, before.Reclaimable+24*mib, "32 MiB of garbage is reclaimable")
	require.GreaterOrEqual(t, s.Allocated, before.Allocated+32*mib)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, Config{Every: 10 * time.Millisecond, Quiet: 2, QuietBytes: mib, MinBytes: 4 * mib})
	}()
	defer func() { cancel(); <-done }()
	require.Eventually(t, func() bool { return r.read().Reclaimable < 4*mib }, 10*time.Second, 10*time.Millisecond,
		"the garbage was collected and given back")
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	assert.GreaterOrEqual(t, ms.HeapReleased, uint64(24*mib), "and returned to the operating system")
}

// On unless the variable says false (envflag reads it).
func TestEnabled(t *testing.T) {
	env := func(v string, set bool) func(string) (string, bool) {
		return func(name string) (string, bool) {
			assert.Equal(t, EnvVar, name)
			return v, set
		}
	}
	on, err := Enabled(env("", false))
	require.NoError(t, err)
	assert.True(t, on, "unset")
	on, err = Enabled(env("false", true))
	require.NoError(t, err)
	assert.False(t, on, "false")
	_, err = Enabled(env("maybe", true))
	require.ErrorContains(t, err, EnvVar, "a value that is not a boolean names the variable")
}

// An idle process with too little garbage to be worth a release (under
// MinBytes reclaimable) is never released twice; after twice
// MaxEveryReleased of quiet it is sampled at MaxEveryReleased all the same,
// and a burst brings it back to Every.
func TestQuietProcessWithNothingToGiveBackIsSampledLessOftenStill(t *testing.T) {
	cfg := testConfig()
	cfg.MaxEvery = 8 * time.Second
	cfg.MaxEveryReleased = 64 * time.Second
	d := NewDecider(cfg)
	at := time.Unix(0, 0)
	var waits []time.Duration
	for at.Before(time.Unix(300, 0)) {
		require.False(t, d.Release(Sample{At: at, Reclaimable: mib}), "under MinBytes: nothing given back")
		waits = append(waits, d.Wait())
		at = at.Add(d.Wait())
	}
	// The first sample only begins; quiet from then on: 1, 2, 4 s, then
	// every 8 s (t = 8 ... 120 s) until 128 s of quiet, then 16, 32, 64 s.
	s := time.Second
	want := []time.Duration{s, s, 2 * s, 4 * s}
	for range 15 {
		want = append(want, 8*s)
	}
	want = append(want, 16*s, 32*s, 64*s, 64*s)
	assert.Equal(t, want, waits)
	assert.False(t, d.Release(Sample{At: at, Allocated: 10 * mib, Reclaimable: 10 * mib}), "a burst")
	assert.Equal(t, time.Second, d.Wait())
}
