// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package buildjobprocessor

import (
	"maps"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap/confmaptest"
)

func telemetryNames(t *testing.T, metadataPath string) []string {
	t.Helper()
	cm, err := confmaptest.LoadConf(metadataPath)
	require.NoError(t, err)
	metrics, ok := cm.Get("telemetry::metrics").(map[string]any)
	require.True(t, ok, "%s has telemetry metrics", metadataPath)
	return slices.Sorted(maps.Keys(metrics))
}

// The processor and the connector share the type name buildjob but are two
// instrumentation scopes; the collector's Prometheus endpoint drops scope
// labels, so one metric name in both would expose duplicate series and the
// endpoint would answer 500. Their own metrics must not share a name.
func TestOwnMetricNamesDoNotCollideWithTheConnector(t *testing.T) {
	processor := telemetryNames(t, "metadata.yaml")
	connector := telemetryNames(t, filepath.Join("..", "..", "connector", "buildjobconnector", "metadata.yaml"))
	require.NotEmpty(t, processor)
	require.NotEmpty(t, connector)
	for _, name := range processor {
		assert.NotContains(t, connector, name)
	}
}
