// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/buildsim"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
)

// setFileSizeLimit sets a running process's RLIMIT_FSIZE (prlimit(2)): no
// file of it may grow past limit, as on a full disk (writes fail with
// EFBIG; a Go program ignores SIGXFSZ).
func setFileSizeLimit(t *testing.T, pid int, limit uint64) {
	t.Helper()
	var old syscall.Rlimit
	lim := syscall.Rlimit{Cur: limit, Max: ^uint64(0)}
	_, _, errno := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), uintptr(syscall.RLIMIT_FSIZE),
		uintptr(unsafe.Pointer(&lim)), uintptr(unsafe.Pointer(&old)), 0, 0)
	require.Zero(t, errno, "prlimit")
}

// TestGatewayDiskFullRefusesRetryably: the gateway's files may not grow
// (its disk is full) while a sidecar sends: the gateway refuses the
// requests with a retryable error instead of acknowledging data it holds
// only in memory, counts and logs it, and stays up; the sidecar keeps them
// in its queue. Once the disk takes writes again everything lands, exactly
// once.
func TestGatewayDiskFullRefusesRetryably(t *testing.T) {
	cw, err := cloudwatchtest.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = cw.Close() })
	gw := newNode(t, "otelcol-gateway.yaml", gatewayEnv(cw, gatewayInterval)...)
	gw.start()
	sc := newNode(t, sidecarConfig, sidecarEnv(gw)...)
	sc.start()

	var s *buildsim.Summary
	done := make(chan error, 1)
	go func() {
		cfg := workload(sc, 0)
		cfg.Jobs, cfg.Rate = 40, 1
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		var err error
		s, err = buildsim.Run(ctx, cfg)
		done <- err
	}()
	require.True(t, binarytest.Eventually(60*time.Second, func() bool { return gw.flushes() >= 1 }), "data flows")

	// The disk fills: no file may grow past its size now.
	var largest int64
	entries, err := os.ReadDir(gw.queueDir)
	require.NoError(t, err)
	for _, e := range entries {
		if info, err := os.Stat(filepath.Join(gw.queueDir, e.Name())); err == nil {
			largest = max(largest, info.Size())
		}
	}
	setFileSizeLimit(t, gw.Pid(), 8) // a journal segment's header
	require.True(t, binarytest.Eventually(60*time.Second, func() bool {
		return gw.telemetryValue("otelcol_intervalmerge_journal_write_failures") > 0
	}), "requests refused because the journal could not write them")
	require.True(t, binarytest.Eventually(30*time.Second, func() bool {
		q, err := queueSizeOf(sc)
		return err == nil && q > 0
	}), "the sidecar keeps the refused requests")
	assert.True(t, binarytest.Healthy(fmt.Sprintf("http://127.0.0.1:%d/", gw.health)), "the gateway stays up")
	assert.Contains(t, gw.Output.String(), "receipt journal could not write")
	setFileSizeLimit(t, gw.Pid(), ^uint64(0))
	t.Logf("files up to %d bytes before the disk filled", largest)

	require.NoError(t, <-done)
	require.Equal(t, s.Generated, s.Acknowledged)
	tr := truth{}
	tr.addService(s.Generated)
	tr.requireLanded(t, cw, 120*time.Second)
	_, err = sc.Stop(30 * time.Second)
	require.NoError(t, err)
	failures := gw.telemetryValue("otelcol_intervalmerge_journal_write_failures")
	_, err = gw.Stop(30 * time.Second)
	require.NoError(t, err)
	assert.Empty(t, tr.mismatches(cw.Datums()), "after every process stopped: no double count")
	t.Logf("requests refused while the disk was full: %v", failures)
}
