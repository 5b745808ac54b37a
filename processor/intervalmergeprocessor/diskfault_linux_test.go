// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package intervalmergeprocessor

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"testing"

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

	signal.Ignore(syscall.SIGXFSZ)
	t.Cleanup(func() { signal.Reset(syscall.SIGXFSZ) })
	var was syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_FSIZE, &was))
	restore := func() { require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_FSIZE, &was)) }
	t.Cleanup(restore)
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: uint64(st.Size()), Max: was.Max})) //nolint:gosec // a file size

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
