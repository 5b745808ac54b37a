// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package storagecheckextension

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/storagetest"
)

var (
	queueOwner = component.MustNewIDWithName("cloudwatch", "queue")
	stateOwner = component.MustNewIDWithName("cloudwatch", "state")
)

// newFileStorage starts the real file_storage on dir.
func newFileStorage(t *testing.T, dir string) extension.Extension {
	t.Helper()
	return storagetest.FileStorage(t, dir, false)
}

// startFileStorage starts the real file_storage on dir and returns a client
// for owner, as an exporter's queue would get it.
func startFileStorage(t *testing.T, dir string, owner component.ID) (storage.Client, func()) {
	t.Helper()
	ext := newFileStorage(t, dir)
	client, err := ext.(storage.Extension).GetClient(context.Background(), component.KindExporter, owner, "")
	require.NoError(t, err)
	return client, func() {
		require.NoError(t, client.Close(context.Background()))
		require.NoError(t, ext.Shutdown(context.Background()))
	}
}

func startCheck(t *testing.T, dir string) (*observer.ObservedLogs, error) {
	t.Helper()
	core, logs := observer.New(zapcore.InfoLevel)
	set := extensiontest.NewNopSettings(NewFactory().Type())
	set.Logger = zap.New(core)
	cfg := createDefaultConfig().(*Config)
	cfg.Directory = dir
	ext, err := NewFactory().Create(context.Background(), set, cfg)
	require.NoError(t, err)
	err = ext.Start(context.Background(), componenttest.NewNopHost())
	require.NoError(t, ext.Shutdown(context.Background()))
	return logs, err
}

func storedFile(t *testing.T, dir string, owner component.ID, value string) string {
	t.Helper()
	client, stop := startFileStorage(t, dir, owner)
	require.NoError(t, client.Set(context.Background(), "k", []byte(value)))
	stop()
	matches, err := filepath.Glob(filepath.Join(dir, "exporter_"+owner.Type().String()+"_"+owner.Name()+"*"))
	require.NoError(t, err)
	require.Len(t, matches, 1)
	return matches[0]
}

func TestDamagedFileIsMovedAsideAndAFreshOneStarts(t *testing.T) {
	for name, damage := range map[string]func(t *testing.T, path string){
		// Both meta pages overwritten: bbolt refuses to open the file.
		"meta pages": func(t *testing.T, path string) { overwrite(t, path, 0, 8192) },
		// A data page overwritten: opens, then bbolt panics or the check fails.
		"data page": func(t *testing.T, path string) { overwrite(t, path, 2*4096, 8192) },
		"truncated": func(t *testing.T, path string) { require.NoError(t, os.Truncate(path, 100)) },
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			damaged := storedFile(t, dir, queueOwner, "queued")
			healthy := storedFile(t, dir, stateOwner, "state")
			damage(t, damaged)
			require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not a storage file"), 0o600))

			logs, err := startCheck(t, dir)
			require.NoError(t, err)

			errs := logs.FilterLevelExact(zapcore.ErrorLevel).All()
			require.Len(t, errs, 1)
			fields := errs[0].ContextMap()
			assert.Equal(t, damaged, fields["file"], "the log names the file")
			aside, _ := fields["moved_to"].(string)
			assert.Regexp(t, `\.\d{8}T\d{6}\.\d{3}Z\.damaged$`, aside)
			assert.FileExists(t, aside, "kept for examination")
			assert.NoFileExists(t, damaged)
			assert.FileExists(t, filepath.Join(dir, "notes.txt"))

			// file_storage starts a fresh file; the healthy neighbour keeps its data.
			client, stop := startFileStorage(t, dir, queueOwner)
			v, err := client.Get(context.Background(), "k")
			require.NoError(t, err)
			assert.Nil(t, v, "a fresh file")
			stop()
			client, stop = startFileStorage(t, dir, stateOwner)
			v, err = client.Get(context.Background(), "k")
			require.NoError(t, err)
			assert.Equal(t, "state", string(v))
			stop()
			assert.FileExists(t, healthy)
		})
	}
}

func TestHealthyAndLockedFilesAreLeftAlone(t *testing.T) {
	dir := t.TempDir()
	healthy := storedFile(t, dir, stateOwner, "state")
	locked := storedFile(t, dir, queueOwner, "queued")
	db, err := bbolt.Open(locked, 0o600, &bbolt.Options{Timeout: time.Second})
	require.NoError(t, err, "another process holds the file")
	defer db.Close()

	logs, err := startCheck(t, dir)
	require.NoError(t, err)
	assert.Zero(t, logs.FilterLevelExact(zapcore.ErrorLevel).Len())
	assert.Equal(t, 1, logs.FilterMessageSnippet("locked by another process").Len())
	assert.FileExists(t, healthy)
	assert.FileExists(t, locked)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 2, "nothing moved aside")
}

func TestMissingDirectoryIsNotAnError(t *testing.T) {
	_, err := startCheck(t, filepath.Join(t.TempDir(), "absent"))
	assert.NoError(t, err)
}

func TestConfigValidateNamesTheField(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	assert.ErrorContains(t, cfg.Validate(), "directory")
	cfg.Directory, cfg.OpenTimeout = "/x", 0
	assert.ErrorContains(t, cfg.Validate(), "open_timeout")
}

func overwrite(t *testing.T, path string, offset int64, n int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	require.NoError(t, err)
	junk := make([]byte, n)
	for i := range junk {
		junk[i] = byte(i*7 + 13)
	}
	_, err = f.WriteAt(junk, offset)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

var _ extension.Extension = (*storageCheck)(nil)
