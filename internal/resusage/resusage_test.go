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

// Spinning on a locked thread adds about as much to the thread's CPU time
// as to the process's; sleeping adds to neither.
func TestThreadAndProcessCPU(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	thread0, err := ThreadCPU()
	require.NoError(t, err)
	process0, err := ProcessCPU()
	require.NoError(t, err)
	for start := time.Now(); time.Since(start) < 50*time.Millisecond; {
	}
	thread1, err := ThreadCPU()
	require.NoError(t, err)
	process1, err := ProcessCPU()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, thread1-thread0, 20*time.Millisecond, "50 ms of spinning on this thread")
	assert.GreaterOrEqual(t, process1-process0, thread1-thread0-time.Millisecond, "the process holds its threads' time")

	time.Sleep(50 * time.Millisecond) // what is measured is that a wait costs no CPU
	thread2, err := ThreadCPU()
	require.NoError(t, err)
	assert.Less(t, thread2-thread1, 20*time.Millisecond, "50 ms asleep")
}
