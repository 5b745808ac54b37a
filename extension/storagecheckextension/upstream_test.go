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
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// The guard test of upstream.go: file_storage opens no file when it
// starts, and the file it opens for a client of any kind of component is
// one the check recognizes and reads with bbolt.
func TestFileStorageFilesAreChecked(t *testing.T) {
	dir := t.TempDir()
	ext := newFileStorage(t, dir)
	defer func() { require.NoError(t, ext.Shutdown(context.Background())) }()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "no file before a component asks for its client")

	for _, kind := range []component.Kind{component.KindReceiver, component.KindProcessor, component.KindExporter, component.KindExtension, component.KindConnector} {
		owner := component.MustNewIDWithName("test_"+kind.String(), "state")
		client, err := ext.(storage.Extension).GetClient(context.Background(), kind, owner, "")
		require.NoError(t, err)
		require.NoError(t, client.Set(context.Background(), "k", []byte("v")))
		require.NoError(t, client.Close(context.Background()))

		matches, err := filepath.Glob(filepath.Join(dir, "*test_"+kind.String()+"*"))
		require.NoError(t, err)
		require.Len(t, matches, 1, kind.String())
		assert.True(t, isStorageFile(filepath.Base(matches[0])), "%s: %s is recognized", kind, matches[0])
		assert.NoError(t, checkFile(matches[0], time.Second), "%s: bbolt reads it", kind)
	}
}
