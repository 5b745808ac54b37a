// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package admissionextension // import "github.com/gpubuild/otelcol-gpubuild/extension/admissionextension"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"

	"github.com/gpubuild/otelcol-gpubuild/extension/admissionextension/internal/admission"
	"github.com/gpubuild/otelcol-gpubuild/extension/admissionextension/internal/metadata"
)

const (
	defaultMaxInFlight = 2
	defaultMaxWaiting  = 64
	defaultWaitTimeout = 10 * time.Second
)

// NewFactory returns the admission extension factory.
func NewFactory() extension.Factory {
	return extension.NewFactory(metadata.Type, createDefaultConfig, create, metadata.ExtensionStability)
}

func createDefaultConfig() component.Config {
	return &Config{MaxInFlight: defaultMaxInFlight, MaxWaiting: defaultMaxWaiting, WaitTimeout: defaultWaitTimeout}
}

func create(_ context.Context, set extension.Settings, cfg component.Config) (extension.Extension, error) {
	c := cfg.(*Config)
	return &admissionExtension{gate: admission.New(c.MaxInFlight, c.MaxWaiting, c.WaitTimeout), maxInFlight: c.MaxInFlight, logger: set.Logger}, nil
}
