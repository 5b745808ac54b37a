// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package intervalmergeprocessor

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"

	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/component/componenttest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/consumer/consumertest"
)

// TestJournalWriteFailureIsARetryableRefusal: when the journal cannot be
// written (here the kernel refuses to let any file of the process grow,
// as a full disk does), the request is refused with a retryable error,
// never acknowledged from memory; nothing torn is left in the journal, and
// the sender's retry once the disk takes writes again is merged once,
// also across a restart.
func TestJournalWriteFailureIsARetryableRefusal(t *testing.T) {
	dir := t.TempDir()
	g := startGateway(t, dir, consumertest.NewNop())
	require.NoError(t, g.ConsumeMetrics(context.Background(), stamped("a", 1, 1)))
	segs := segments(t, dir)
	require.Len(t, segs, 1)
	st, err := os.Stat(segs[0])
	require.NoError(t, err)

	restore := limitFileSize(t, st.Size())

	err = g.ConsumeMetrics(context.Background(), stamped("a", 2, 10))
	require.Error(t, err, "not acknowledged")
	assert.False(t, consumererror.IsPermanent(err), "retryable: the sender keeps it")
	assert.ErrorContains(t, err, "file too large")
	assert.Equal(t, int64(1), g.counter(t, "journal_write_failures"))
	assert.NotEmpty(t, g.logs.FilterMessageSnippet("receipt journal could not write").All())
	after, err := os.Stat(segs[0])
	require.NoError(t, err)
	assert.Equal(t, st.Size(), after.Size(), "no torn record left behind")
	restore()

	require.NoError(t, g.ConsumeMetrics(context.Background(), stamped("a", 2, 10)), "the sender's retry")
	assert.Zero(t, g.counter(t, "requests_duplicate"), "the refused request was never merged")
	g.kill()
	sink := &consumertest.MetricsSink{}
	g2 := startGateway(t, dir, sink)
	require.NoError(t, g2.ConsumeMetrics(context.Background(), stamped("a", 2, 10)))
	g2.flush(context.Background(), true)
	assert.Equal(t, int64(11), total(sink))
}

// limitFileSize keeps every file of this process from growing past size,
// as a full disk would, until the returned func (also run at cleanup).
func limitFileSize(t *testing.T, size int64) (restore func()) {
	t.Helper()
	signal.Ignore(syscall.SIGXFSZ)
	t.Cleanup(func() { signal.Reset(syscall.SIGXFSZ) })
	var was syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_FSIZE, &was))
	restore = func() { require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_FSIZE, &was)) }
	t.Cleanup(restore)
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: uint64(size), Max: was.Max})) //nolint:gosec // a file size
	return restore
}

// TestJournalWriteFailureIsARecoverableStatusUntilTheDiskTakesWrites: a
// journal that cannot write (a full disk) makes the processor report a
// recoverable error at the first refused request, so that a gateway's
// readiness takes it out of its load balancer's rotation; a hand-over
// while the disk is still full keeps it; once the disk takes writes, the
// next hand-over's probe reports OK without a request coming in (a gateway
// out of rotation gets none), and no probe file is left behind.
func TestJournalWriteFailureIsARecoverableStatusUntilTheDiskTakesWrites(t *testing.T) {
	host := &statusHost{Host: componenttest.NewNopHost()}
	p := startWithHost(t, consumertest.NewNop(), host, 1<<30)
	ctx := context.Background()
	require.NoError(t, p.ConsumeMetrics(ctx, stamped("a", 1, 1)))
	require.Empty(t, host.statuses())
	dir := p.cfg.State.Journal.Directory
	segs := segments(t, dir)
	require.Len(t, segs, 1)
	st, err := os.Stat(segs[0])
	require.NoError(t, err)

	restore := limitFileSize(t, st.Size())
	for i := range 3 {
		require.Error(t, p.ConsumeMetrics(ctx, stamped("a", uint64(i+2), 1)))
	}
	require.Equal(t, []componentstatus.Status{componentstatus.StatusRecoverableError}, host.statuses(), "reported once")
	host.mu.Lock()
	assert.ErrorContains(t, host.events[0].Err(), "receipt journal cannot be written")
	host.mu.Unlock()
	p.flush(ctx, false)
	require.Len(t, host.statuses(), 1, "still failing: the probe could not write")

	restore()
	p.flush(ctx, false)
	assert.Equal(t, []componentstatus.Status{componentstatus.StatusRecoverableError, componentstatus.StatusOK}, host.statuses())
	probes, err := filepath.Glob(filepath.Join(dir, "*.probe"))
	require.NoError(t, err)
	assert.Empty(t, probes)
	require.NoError(t, p.ConsumeMetrics(ctx, stamped("a", 9, 1)))
	assert.Len(t, host.statuses(), 2, "no report while nothing changes")
}

// The same failure ends at the next request the journal takes, without
// waiting for a hand-over.
func TestJournalWriteFailureEndsAtTheNextWrite(t *testing.T) {
	host := &statusHost{Host: componenttest.NewNopHost()}
	p := startWithHost(t, consumertest.NewNop(), host, 1<<30)
	ctx := context.Background()
	require.NoError(t, p.ConsumeMetrics(ctx, stamped("a", 1, 1)))
	st, err := os.Stat(segments(t, p.cfg.State.Journal.Directory)[0])
	require.NoError(t, err)
	restore := limitFileSize(t, st.Size())
	require.Error(t, p.ConsumeMetrics(ctx, stamped("a", 2, 1)))
	restore()
	require.NoError(t, p.ConsumeMetrics(ctx, stamped("a", 2, 1)))
	assert.Equal(t, []componentstatus.Status{componentstatus.StatusRecoverableError, componentstatus.StatusOK}, host.statuses())
}
