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
