// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package buildjobconnector

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gpubuild/otelcol-gpubuild/connector/buildjobconnector/internal/metadata"
)

// Configured as upstream components are, without state.storage, the
// connector says once at start (for its traces and logs instances
// together) that its state is in memory only, and which setting keeps it.
func TestInMemoryStateIsSaidOnceAtStart(t *testing.T) {
	ctx := context.Background()
	core, logs := observer.New(zap.WarnLevel)
	set := connectortest.NewNopSettings(metadata.Type)
	set.Logger = zap.New(core)
	f := NewFactory()
	cfg := f.CreateDefaultConfig()
	traces, err := f.CreateTracesToMetrics(ctx, set, cfg, consumertest.NewNop())
	require.NoError(t, err)
	logsConn, err := f.CreateLogsToMetrics(ctx, set, cfg, consumertest.NewNop())
	require.NoError(t, err)
	require.NoError(t, traces.Start(ctx, componenttest.NewNopHost()))
	require.NoError(t, logsConn.Start(ctx, componenttest.NewNopHost()))
	require.NoError(t, traces.Shutdown(ctx))
	require.NoError(t, logsConn.Shutdown(ctx))

	warnings := logs.FilterMessageSnippet("in memory only").All()
	require.Len(t, warnings, 1)
	assert.Contains(t, warnings[0].Message, "state.storage")
}
