// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package buildjobprocessor

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/gpubuild/otelcol-gpubuild/processor/buildjobprocessor/internal/metadata"
)

func loadConfig(t *testing.T, name string) (*Config, error) {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	sub, err := cm.Sub(component.NewIDWithName(metadata.Type, name).String())
	require.NoError(t, err)
	cfg := createDefaultConfig().(*Config)
	return cfg, sub.Unmarshal(cfg)
}

func TestLoadConfig(t *testing.T) {
	cfg, err := loadConfig(t, "")
	require.NoError(t, err)
	require.NoError(t, confmap.Validate(cfg))
	assert.Equal(t, createDefaultConfig(), cfg)

	cfg, err = loadConfig(t, "custom")
	require.NoError(t, err)
	require.NoError(t, confmap.Validate(cfg))
	want := createDefaultConfig().(*Config)
	want.Dimensions = []string{"build.engine"}
	want.MetricsFlushInterval = 30 * time.Second
	assert.Equal(t, want, cfg)
}

func TestValidateNamesTheField(t *testing.T) {
	cfg, err := loadConfig(t, "bad_interval")
	require.NoError(t, err)
	require.EqualError(t, confmap.Validate(cfg), "metrics_flush_interval: must be positive")
}

// job_span_names and the other connector keys mean nothing to the
// processor: a misplaced key fails loudly instead of being ignored.
func TestConnectorKeysAreRejected(t *testing.T) {
	_, err := loadConfig(t, "connector_keys")
	require.ErrorContains(t, err, "job_span_names")
}
