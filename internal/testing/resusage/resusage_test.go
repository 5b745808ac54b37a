// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package resusage

import (
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStatusKiB(t *testing.T) {
	status := "VmRSS:\t   56572 kB\nRssAnon:\t    9744 kB\nRssFile:\t   45424 kB\n"
	assert.Equal(t, int64(9744), StatusKiB(status, "RssAnon:"))
	assert.Equal(t, int64(45424), StatusKiB(status, "RssFile:"))
	assert.Zero(t, StatusKiB("VmRSS:\t   56572 kB\n", "RssAnon:"))
}

func TestStatusKiBOfThisProcess(t *testing.T) {
	b, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	assert.Positive(t, StatusKiB(string(b), "VmRSS:"))
}

func TestFileRSSKiBByPath(t *testing.T) {
	smaps := `00400000-00c00000 r-xp 00000000 08:01 12 /opt/otel col/otelcol-gpubuild
Rss:                6000 kB
00c00000-00d00000 r--p 00800000 08:01 12 /opt/otel col/otelcol-gpubuild
Rss:                 400 kB
7f1000000000-7f1000200000 r-xp 00000000 08:01 77 /usr/lib/x86_64-linux-gnu/libc.so.6
Rss:                 900 kB
c000000000-c004000000 rw-p 00000000 00:00 0
Rss:               30000 kB
7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0                          [stack]
Rss:                  40 kB
`
	assert.Equal(t, map[string]int64{"/opt/otel col/otelcol-gpubuild": 6400, "/usr/lib/x86_64-linux-gnu/libc.so.6": 900}, FileRSSKiB(smaps),
		"each file's mappings summed, a path with a space whole; the heap and the stack are no file")
}

// Spinning on a locked thread adds to the thread's CPU time and as much to
// the process's; sleeping adds to neither.
func TestThreadAndProcessCPU(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	thread0, err := ThreadCPU()
	require.NoError(t, err)
	process0, err := ProcessCPU()
	require.NoError(t, err)
	// Spin until the thread has used 20 ms (a shared machine may take it
	// longer than 20 ms of wall time to give them).
	thread1 := thread0
	for deadline := time.Now().Add(10 * time.Second); thread1-thread0 < 20*time.Millisecond; {
		require.True(t, time.Now().Before(deadline), "the spinning thread's CPU time did not grow: %v", thread1-thread0)
		thread1, err = ThreadCPU()
		require.NoError(t, err)
	}
	process1, err := ProcessCPU()
	require.NoError(t, err)
	// The kernel splits the process's total into user and system time by
	// tick samples, so the two sums differ by a few ms either way.
	assert.GreaterOrEqual(t, process1-process0, (thread1-thread0)/2, "the process holds its threads' time")

	time.Sleep(50 * time.Millisecond) // what is measured is that a wait costs no CPU
	thread2, err := ThreadCPU()
	require.NoError(t, err)
	assert.Less(t, thread2-thread1, 20*time.Millisecond, "50 ms asleep")
}
