// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package buildjobconnector

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/extension/extensiontest"

	"github.com/gpubuild/otelcol-gpubuild/connector/buildjobconnector/internal/metadata"
	"github.com/gpubuild/otelcol-gpubuild/extension/nvmlsamplerextension"
)

type hostWith map[component.ID]component.Component

func (h hostWith) GetExtensions() map[component.ID]component.Component { return h }

// TestGPUSamplerMustExist: a gpu_sampler that names no configured
// extension, or one that is not an nvml_sampler, fails the start with the
// setting's name; a real nvml_sampler (dormant here: no NVML) starts.
func TestGPUSamplerMustExist(t *testing.T) {
	ctx := context.Background()
	samplerID := component.MustNewID("nvml_sampler")
	cfg := createDefaultConfig().(*Config)
	require.NoError(t, confmap.NewFromStringMap(map[string]any{"gpu_sampler": "nvml_sampler"}).Unmarshal(cfg))
	require.NotNil(t, cfg.GPUSampler)
	assert.Equal(t, samplerID, *cfg.GPUSampler)

	ef := nvmlsamplerextension.NewFactory()
	sampler, err := ef.Create(ctx, extensiontest.NewNopSettings(ef.Type()), ef.CreateDefaultConfig())
	require.NoError(t, err)
	require.NoError(t, sampler.Start(ctx, hostWith{}))
	defer func() { require.NoError(t, sampler.Shutdown(ctx)) }()
	other := extensiontest.NewNopFactory()
	nop, err := other.Create(ctx, extensiontest.NewNopSettings(other.Type()), other.CreateDefaultConfig())
	require.NoError(t, err)

	for name, tc := range map[string]struct {
		host hostWith
		want string
	}{
		"missing":       {hostWith{}, `gpu_sampler: no extension "nvml_sampler"`},
		"not a sampler": {hostWith{samplerID: nop}, `gpu_sampler: extension "nvml_sampler" is not an nvml_sampler`},
		"sampler":       {hostWith{samplerID: sampler}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			f := NewFactory()
			c, err := f.CreateTracesToMetrics(ctx, connectortest.NewNopSettings(metadata.Type), cfg, consumertest.NewNop())
			require.NoError(t, err)
			err = c.Start(ctx, tc.host)
			if tc.want != "" {
				assert.ErrorContains(t, err, tc.want)
			} else {
				assert.NoError(t, err)
			}
			require.NoError(t, c.Shutdown(ctx))
		})
	}
}
