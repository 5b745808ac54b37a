// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package nvmlsamplerextension // import "github.com/gpubuild/otelcol-gpubuild/extension/nvmlsamplerextension"

import (
	"context"
	"errors"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"

	"github.com/gpubuild/otelcol-gpubuild/extension/nvmlsamplerextension/internal/metadata"
	"github.com/gpubuild/otelcol-gpubuild/internal/gpucost"
)

// NewFactory returns the nvml_sampler extension factory.
func NewFactory() extension.Factory {
	return extension.NewFactory(metadata.Type, func() component.Config { return createDefaultConfig() }, create, metadata.ExtensionStability)
}

func create(_ context.Context, set extension.Settings, cfg component.Config) (extension.Extension, error) {
	c, ok := cfg.(*Config)
	if !ok {
		return nil, errors.New("nvml_sampler: unexpected config type")
	}
	return newSampler(c, set.Logger), nil
}

// Both builds (with and without cgo) offer gpucost.Sampler.
var _ gpucost.Sampler = (*sampler)(nil)
