// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package writefailure

import (
	"context"
	"io/fs"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

func TestWriteFailureReasons(t *testing.T) {
	for errno, want := range map[syscall.Errno]string{
		syscall.ENOSPC: "no_space", syscall.EDQUOT: "no_space", syscall.EIO: "io_error", syscall.EROFS: "read_only", syscall.EACCES: "other",
	} {
		reason, ok := writeFailureReason(&fs.PathError{Op: "write", Path: "/q/f", Err: errno})
		assert.True(t, ok, "%v", errno)
		assert.Equal(t, want, reason, "%v", errno)
	}
	_, ok := writeFailureReason(exporterhelper.ErrQueueIsFull)
	assert.False(t, ok, "a full queue is the byte cap, not a write failure")
	_, ok = writeFailureReason(context.DeadlineExceeded)
	assert.False(t, ok)
}

// With nothing held, the reserve in place and the queue empty, the writer
// stops reading the volume's free space; a request wakes it, and it looks
// at the reserve while the queue holds data. Enqueue still looks at the
// reserve before it writes, so a volume that ran low meanwhile is seen
// before the queue's write fails.
func TestReserveLookedAtWhileDataIsQueuedOnly(t *testing.T) {
	var queued, statfs atomic.Int64
	turn := make(chan struct{}, 1)
	s := New(Settings{
		Storage:          component.MustNewID("file_storage"),
		LimitBytes:       1 << 20,
		ReserveDirectory: t.TempDir(),
		ReserveBytes:     1 << 10,
		Logger:           zap.NewNop(),
		Failures:         noop.Int64Counter{},
		Consume: func(context.Context, pmetric.Metrics) error {
			queued.Add(1)
			return nil
		},
		QueueSize: func(context.Context) (int64, bool) { return queued.Load(), true },
		Turn:      turn,
	})
	s.pollInterval = time.Millisecond
	s.reserve.statfs = func(path string, st *unix.Statfs_t) error {
		statfs.Add(1)
		return unix.Statfs(path, st)
	}
	s.Start()
	t.Cleanup(func() { s.Stop(context.Background()) })

	// Idle: the writer parks (it takes the turn no more).
	requireParked := func() {
		t.Helper()
		require.Eventually(t, func() bool {
			n := statfs.Load()
			// Hundreds of poll intervals with no look at the volume.
			time.Sleep(200 * s.pollInterval)
			return statfs.Load() == n
		}, 10*time.Second, time.Millisecond)
	}
	requireParked()

	// A request: Enqueue looks at the volume before it writes.
	before := statfs.Load()
	turn <- struct{}{}
	require.NoError(t, s.Enqueue(context.Background(), pmetric.NewMetrics()))
	<-turn
	assert.Greater(t, statfs.Load(), before, "the reserve is looked at before the write")
	assert.Equal(t, int64(1), queued.Load())

	// Data queued: the writer looks at the reserve again and again.
	after := statfs.Load()
	require.Eventually(t, func() bool { return statfs.Load() >= after+3 }, 10*time.Second, time.Millisecond)

	// The queue empties: the writer parks again.
	queued.Store(0)
	requireParked()
}

// While the queue only holds data, the writer looks at the reserve again
// before a writer filling the volume at 64 MiB/s could reach it: every
// poll interval when the volume is nearly full, up to every ten with room
// to spare; while data is held or a failure lasts, every poll interval.
func TestReserveLookedAtSoonerAsTheVolumeFills(t *testing.T) {
	const reserve = 4 << 20
	var free atomic.Int64
	s := New(Settings{
		Storage:          component.MustNewID("file_storage"),
		LimitBytes:       1 << 20,
		ReserveDirectory: t.TempDir(),
		ReserveBytes:     reserve,
		Logger:           zap.NewNop(),
		Failures:         noop.Int64Counter{},
		Consume:          func(context.Context, pmetric.Metrics) error { return nil },
		QueueSize:        func(context.Context) (int64, bool) { return 1, true },
		Turn:             make(chan struct{}, 1),
	})
	s.reserve.statfs = func(_ string, st *unix.Statfs_t) error {
		st.Bsize = 1
		st.Bavail = uint64(free.Load())
		return nil
	}
	free.Store(1 << 30)
	require.NoError(t, s.reserve.create())
	for _, c := range []struct {
		free int64
		want time.Duration
	}{
		{reserve + 1<<30, 10 * time.Second}, // 16 s away at 64 MiB/s: the cap
		{reserve + 320<<20, 5 * time.Second},
		{reserve + 16<<20, time.Second}, // a quarter second away: the poll interval
	} {
		free.Store(c.free)
		s.checkReserve()
		require.True(t, s.reserve.inPlace)
		assert.Equal(t, c.want, s.watchInterval(), "free %d", c.free)
	}
	free.Store(reserve - 1)
	s.checkReserve()
	require.False(t, s.reserve.inPlace, "under its size the reserve is deleted")
	assert.Equal(t, time.Second, s.watchInterval(), "a failure episode: every poll interval")
}
