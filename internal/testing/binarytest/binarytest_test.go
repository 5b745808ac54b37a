// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package binarytest

import (
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseStatusMem(t *testing.T) {
	rss, peak := ParseStatusMem("Name:\totelcol\nVmHWM:\t   61440 kB\nVmRSS:\t   51200 kB\nThreads:\t12\n")
	assert.Equal(t, int64(51200), rss)
	assert.Equal(t, int64(61440), peak)
}

func TestMemKiBOfThisProcess(t *testing.T) {
	rss, peak, err := MemKiB(os.Getpid())
	require.NoError(t, err)
	assert.Positive(t, rss)
	assert.GreaterOrEqual(t, peak, rss)

	_, _, err = MemKiB(-1)
	assert.Error(t, err)
}

func TestEnvWithout(t *testing.T) {
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("GPUBUILD_X", "1")
	t.Setenv("KEEP_ME", "yes")
	env := EnvWithout("AWS_", "GPUBUILD_")
	assert.Contains(t, env, "KEEP_ME=yes")
	assert.NotContains(t, env, "AWS_SECRET_ACCESS_KEY=secret")
	assert.NotContains(t, env, "GPUBUILD_X=1")
}

// A process that handles SIGTERM stops without error; one that dies of it
// (as the collector does before its handler is installed) is named so.
func TestStopTellsAHandledSIGTERMFromDeathBySIGTERM(t *testing.T) {
	handled, err := Start([]string{"sh", "-c", `trap 'exit 0' TERM; echo ready; while :; do sleep 0.05; done`}, nil, 1024)
	require.NoError(t, err)
	require.NoError(t, handled.AwaitOutput("ready", 10*time.Second))
	_, err = handled.Stop(10 * time.Second)
	require.NoError(t, err)

	unhandled, err := Start([]string{"sleep", "30"}, nil, 1024)
	require.NoError(t, err)
	_, err = unhandled.Stop(10 * time.Second)
	require.ErrorContains(t, err, "signal: terminated")
	require.ErrorIs(t, err, ErrSIGTERMBeforeHandler)
}

// SampleMem on this process (it samples at least once, even when stopped
// at once): it sees a resident set, and the kernel's peak is at least the
// largest one sampled.
func TestSampleMemOfThisProcess(t *testing.T) {
	peak := SampleMem(os.Getpid(), time.Millisecond)()
	assert.Positive(t, peak.RSS)
	assert.GreaterOrEqual(t, peak.HWM, peak.RSS)
}

// Ports are distinct, free, and below the range the kernel takes the local
// ports of outgoing connections from.
func TestFreePortsAreDistinctAndBelowTheEphemeralRange(t *testing.T) {
	lo, hi := portsBelowEphemeral()
	require.Less(t, lo, hi, "this machine's ephemeral range leaves no ports below it")
	seen := map[int]bool{}
	for _, p := range FreePorts(t, 50) {
		assert.False(t, seen[p], "port %d twice", p)
		seen[p] = true
		assert.GreaterOrEqual(t, p, lo)
		assert.LessOrEqual(t, p, hi)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		require.NoError(t, err, "port %d is not free", p)
		_ = l.Close()
	}
}

// A port claimed elsewhere is not handed out, and one process hands a port
// out once. Two portClaims on one folder stand for two test processes: the
// lock belongs to the open file, so they refuse each other as processes do.
func TestAPortIsHandedOutOnceAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	first, second := &portClaims{dir: dir}, &portClaims{dir: dir}
	lo, hi := portsBelowEphemeral()
	require.Less(t, lo, hi, "this machine's ephemeral range leaves no ports below it")

	mine, err := first.pick(1, lo, hi)
	require.NoError(t, err)
	p := mine[0]
	ok, err := second.claim(p)
	require.NoError(t, err)
	assert.False(t, ok, "another process claimed port %d while the first holds it", p)
	ok, err = first.claim(p)
	require.NoError(t, err)
	assert.False(t, ok, "port %d handed out twice by one process", p)

	// With the range down to that one port, the other process finds none.
	_, err = second.pick(1, p, p)
	assert.ErrorContains(t, err, "no free port")
}
