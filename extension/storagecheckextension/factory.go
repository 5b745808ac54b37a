// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package storagecheckextension // import "github.com/gpubuild/otelcol-gpubuild/extension/storagecheckextension"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"

	"github.com/gpubuild/otelcol-gpubuild/extension/storagecheckextension/internal/metadata"
)

const defaultOpenTimeout = time.Second

// NewFactory returns the storage_check extension factory.
func NewFactory() extension.Factory {
	return extension.NewFactory(metadata.Type, createDefaultConfig, create, metadata.ExtensionStability)
}

func createDefaultConfig() component.Config {
	return &Config{OpenTimeout: defaultOpenTimeout}
}

func create(_ context.Context, set extension.Settings, cfg component.Config) (extension.Extension, error) {
	return &storageCheck{cfg: cfg.(*Config), logger: set.Logger, now: time.Now}, nil
}
