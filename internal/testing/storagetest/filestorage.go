// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package storagetest // import "github.com/gpubuild/otelcol-gpubuild/internal/testing/storagetest"

import (
	"context"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/extensiontest"
)

// FileStorage starts the real file_storage extension (id file_storage)
// over dir, syncing each transaction when fsync is set. The caller shuts
// it down, or leaves it open to act out a killed process.
func FileStorage(tb testing.TB, dir string, fsync bool) extension.Extension {
	tb.Helper()
	f := filestorage.NewFactory()
	cfg := f.CreateDefaultConfig().(*filestorage.Config)
	cfg.Directory, cfg.Compaction.Directory = dir, dir
	cfg.FSync = fsync
	ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(f.Type()), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if err := ext.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		tb.Fatal(err)
	}
	return ext
}
