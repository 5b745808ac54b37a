// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package nvmlreceiver

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/gpubuild/otelcol-gpubuild/receiver/nvmlreceiver/internal/metadata"
)

func loadConfig(t *testing.T, name string) *Config {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	cfg := NewFactory().CreateDefaultConfig()
	sub, err := cm.Sub(component.MustNewIDWithName(metadata.Type.String(), name).String())
	require.NoError(t, err)
	require.NoError(t, sub.Unmarshal(cfg))
	return cfg.(*Config)
}

func TestDefaultConfig(t *testing.T) {
	cfg := loadConfig(t, "")
	assert.Equal(t, 10*time.Second, cfg.CollectionInterval)
	assert.Equal(t, time.Second, cfg.InitialDelay)
	assert.Equal(t, time.Minute, cfg.InitRetryInterval)
	assert.Equal(t, 15*time.Minute, cfg.InitRetryMaxInterval)
	assert.True(t, cfg.PerProcess)
	assert.Empty(t, cfg.Devices)
	assert.True(t, cfg.Metrics.HwGpuUtilization.Enabled)
	assert.True(t, cfg.Metrics.GpuXidErrors.Enabled)
	assert.True(t, cfg.ResourceAttributes.HwID.Enabled)
	require.NoError(t, confmap.Validate(cfg))
}

func TestCustomConfig(t *testing.T) {
	cfg := loadConfig(t, "custom")
	assert.Equal(t, 5*time.Second, cfg.CollectionInterval)
	assert.Equal(t, 2*time.Second, cfg.InitialDelay)
	assert.Equal(t, 3*time.Second, cfg.Timeout)
	assert.Equal(t, 30*time.Second, cfg.InitRetryInterval)
	assert.Equal(t, 5*time.Minute, cfg.InitRetryMaxInterval)
	// A YAML integer index is accepted like a quoted one.
	assert.Equal(t, []string{"0", "GPU-4f5e3a1c-8c2d-4b8e-9f1a-2b3c4d5e6f70", "2"}, cfg.Devices)
	assert.False(t, cfg.PerProcess)
	assert.False(t, cfg.Metrics.GpuXidErrors.Enabled)
	assert.False(t, cfg.Metrics.GpuClockThrottled.Enabled)
	assert.True(t, cfg.Metrics.HwGpuUtilization.Enabled)
	assert.False(t, cfg.ResourceAttributes.HostName.Enabled)
	require.NoError(t, confmap.Validate(cfg))
}

func TestInvalidConfig(t *testing.T) {
	tests := []struct {
		name    string
		wantErr []string
	}{
		{name: "bad_retry", wantErr: []string{"init_retry_interval: must be positive"}},
		{name: "bad_retry_max", wantErr: []string{"init_retry_max_interval: must be positive"}},
		{name: "retry_max_under_retry", wantErr: []string{"init_retry_max_interval: must be at least init_retry_interval (2m0s), got 1m0s"}},
		{name: "bad_devices", wantErr: []string{
			"devices[0]: must not be empty",
			`devices[2]: "GPU-a" is listed twice`,
			`devices[3]: "-1" is neither a GPU index`,
			`devices[4]: "nvidia0" is neither a GPU index`,
		}},
		{name: "bad_interval", wantErr: []string{"collection_interval"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := confmap.Validate(loadConfig(t, tt.name))
			require.Error(t, err)
			for _, want := range tt.wantErr {
				assert.ErrorContains(t, err, want)
			}
		})
	}
}
