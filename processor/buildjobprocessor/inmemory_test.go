// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package buildjobprocessor

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gpubuild/otelcol-gpubuild/processor/buildjobprocessor/internal/metadata"
)

// Without state.storage the processor says once at start that its state
// is in memory only, and which setting keeps it.
func TestInMemoryStateIsSaidAtStart(t *testing.T) {
	ctx := context.Background()
	core, logs := observer.New(zap.WarnLevel)
	set := processortest.NewNopSettings(metadata.Type)
	set.Logger = zap.New(core)
	f := NewFactory()
	p, err := f.CreateMetrics(ctx, set, f.CreateDefaultConfig(), consumertest.NewNop())
	require.NoError(t, err)
	require.NoError(t, p.Start(ctx, componenttest.NewNopHost()))
	require.NoError(t, p.Shutdown(ctx))

	warnings := logs.FilterMessageSnippet("in memory only").All()
	require.Len(t, warnings, 1)
	assert.Contains(t, warnings[0].Message, "state.storage")
}
