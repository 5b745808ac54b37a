// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package hostile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
)

// storageFiles are the queue and state files file_storage keeps in dir.
func storageFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		// file_storage names its files <kind>_<type>_<name>; the exporter's
		// write reserve (cloudwatch-write-reserve) is no storage file.
		isStorage := strings.HasPrefix(e.Name(), "exporter_") || strings.HasPrefix(e.Name(), "processor_") ||
			strings.HasPrefix(e.Name(), "connector_") || strings.HasPrefix(e.Name(), "receiver_")
		if isStorage && !strings.Contains(e.Name(), ".") && e.Type().IsRegular() {
			files = append(files, filepath.Join(dir, e.Name()))
		}
	}
	return files
}

// Damaged queue and state files (their meta and first data pages
// overwritten, as a torn write or a bad disk leaves them): the sidecar moves
// each aside, logs it at error naming the file, starts fresh ones and keeps
// running. Before, bbolt panicked at start and the sidecar crash-looped.
func TestDamagedQueueFileIsMovedAside(t *testing.T) {
	dir := t.TempDir()
	first := startSidecar(t, dir)
	require.True(t, binarytest.Eventually(30*time.Second, func() bool { return len(storageFiles(t, dir)) > 0 }),
		"the sidecar created its queue and state files")
	stopSoonAfterReady(t, first)

	damaged := storageFiles(t, dir)
	junk := make([]byte, 4*4096)
	for i := range junk {
		junk[i] = byte(i*7 + 13)
	}
	for _, f := range damaged {
		fh, err := os.OpenFile(f, os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = fh.WriteAt(junk, 0)
		require.NoError(t, err)
		require.NoError(t, fh.Close())
	}

	second := startSidecar(t, dir)
	for _, f := range damaged {
		require.NoError(t, second.AwaitOutput(f, 30*time.Second), "the log names %s", f)
		var line string
		for _, l := range strings.Split(second.Output.String(), "\n") {
			if strings.Contains(l, f) && strings.Contains(l, "damaged storage file was moved aside") {
				line = l
			}
		}
		require.NotEmpty(t, line, "an error line names %s", f)
		assert.Contains(t, line, "error")
		aside, err := filepath.Glob(f + ".*.damaged")
		require.NoError(t, err)
		assert.Len(t, aside, 1, "%s kept aside for examination", f)
		assert.FileExists(t, f, "a fresh file was started")
	}
	// Still running and healthy a while later (a crash loop would have exited).
	require.True(t, binarytest.Eventually(5*time.Second, func() bool {
		return strings.Contains(second.Output.String(), "Everything is ready")
	}))
	assert.False(t, second.Exited())
	assert.True(t, binarytest.Healthy(second.health))
	_, err := second.Stop(30 * time.Second)
	assert.NoError(t, err, "a clean exit")
}
