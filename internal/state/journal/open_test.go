// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestFileNameFollowsTheStorageFileAndEscapesUnsafeCharacters(t *testing.T) {
	owner := component.MustNewIDWithName("cloudwatch", "a/b é")
	assert.Equal(t, "exporter_cloudwatch_a/b é_cumulative_state", StorageClientName(component.KindExporter, owner, "cumulative_state"))
	assert.Equal(t, "journal_exporter_cloudwatch_a~002Fb~0020~00E9_cumulative_state", FileName(component.KindExporter, owner, "cumulative_state"))
}

// OpenFor creates the directory, opens the component's journal there and
// says at warn or info what the previous process left.
func TestOpenForLogsWhatThePreviousProcessLeft(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "not", "yet")
	owner := component.MustNewID("cloudwatch")
	cfg := Config{Directory: dir, CheckpointInterval: DefaultCheckpointInterval}
	base := newBase()
	open := func() (*observer.ObservedLogs, *Client) {
		core, logs := observer.New(zapcore.InfoLevel)
		c, path, err := OpenFor(ctx, base, cfg, component.KindExporter, owner, "cumulative_state", "cumulative_state.journal", "cumulative state", zap.New(core))
		require.NoError(t, err)
		assert.Equal(t, filepath.Join(dir, "journal_exporter_cloudwatch__cumulative_state"), path)
		return logs, c
	}

	logs, c := open()
	assert.Zero(t, logs.Len(), "a fresh journal: nothing to say")
	require.NoError(t, c.Set(ctx, "a", []byte("1")))
	require.NoError(t, c.Set(ctx, "b", []byte("2")))
	require.NoError(t, c.f.Close()) // killed before a checkpoint

	logs, c = open()
	require.Equal(t, 1, logs.Len())
	entry := logs.All()[0]
	assert.Equal(t, zapcore.InfoLevel, entry.Level)
	assert.Equal(t, "Wrote the cumulative state journal left by the previous process into the storage", entry.Message)
	assert.Equal(t, int64(2), entry.ContextMap()["records"])
	assert.Equal(t, []byte("2"), base.Value("b"))

	require.NoError(t, c.Set(ctx, "c", []byte("3")))
	require.NoError(t, c.f.Close())
	path := filepath.Join(dir, FileName(component.KindExporter, owner, "cumulative_state"))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write([]byte{9, 0, 0, 0, 1}) // a record torn by a crash
	require.NoError(t, err)
	require.NoError(t, f.Close())

	logs, c = open()
	require.Equal(t, 1, logs.Len())
	entry = logs.All()[0]
	assert.Equal(t, zapcore.WarnLevel, entry.Level)
	assert.Contains(t, entry.Message, "Discarded the incomplete last record of the cumulative state journal")
	assert.Equal(t, int64(5), entry.ContextMap()["bytes"])
	assert.Equal(t, []byte("3"), base.Value("c"), "the whole records before the torn one are applied")
	require.NoError(t, c.f.Close())

	require.NoError(t, os.WriteFile(path, []byte("not a journal"), 0o600))
	logs, c = open()
	require.Equal(t, 1, logs.Len())
	assert.Equal(t, zapcore.WarnLevel, logs.All()[0].Level)
	assert.Contains(t, logs.All()[0].Message, "Set aside a cumulative state journal that could not be read")
	require.NoError(t, c.Close(ctx))
}

func TestOpenForNamesTheFieldWhenTheDirectoryCannotBeMade(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	cfg := Config{Directory: filepath.Join(file, "sub"), CheckpointInterval: DefaultCheckpointInterval}
	_, _, err := OpenFor(context.Background(), newBase(), cfg, component.KindExporter, component.MustNewID("cloudwatch"), "cumulative_state", "cumulative_state.journal", "cumulative state", zap.NewNop())
	require.ErrorContains(t, err, "cumulative_state.journal.directory: ")
}
