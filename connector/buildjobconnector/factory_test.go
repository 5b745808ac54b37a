// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package buildjobconnector

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"

	"github.com/gpubuild/otelcol-gpubuild/connector/buildjobconnector/internal/metadata"
)

func TestFactoryOffersTracesAndLogsOnly(t *testing.T) {
	f := NewFactory()
	assert.Equal(t, metadata.TracesToMetricsStability, f.TracesToMetricsStability())
	assert.Equal(t, metadata.LogsToMetricsStability, f.LogsToMetricsStability())
	_, err := f.CreateMetricsToMetrics(context.Background(), connectortest.NewNopSettings(metadata.Type), f.CreateDefaultConfig(), consumertest.NewNop())
	assert.Error(t, err, "metrics -> metrics is the processor's job")
}

// The processor asks the factory which connectors derive api.requests from
// spans; the traces and logs instances of one id count as one connector.
func TestFactoryListsConnectorsDerivingAPIRequestsFromSpans(t *testing.T) {
	ctx := context.Background()
	f := NewFactory()
	// The interface the processor asserts (processor/buildjobprocessor's
	// upstream.go), as the processor sees the factory.
	src, ok := f.(interface{ APIRequestsFromSpans() []component.ID })
	require.True(t, ok)
	create := func(name string, fromSpans bool) {
		cfg := f.CreateDefaultConfig().(*Config)
		cfg.APIRequestsFromSpans = fromSpans
		set := connectortest.NewNopSettings(metadata.Type)
		set.ID = component.NewIDWithName(metadata.Type, name)
		tc, err := f.CreateTracesToMetrics(ctx, set, cfg, consumertest.NewNop())
		require.NoError(t, err)
		lc, err := f.CreateLogsToMetrics(ctx, set, cfg, consumertest.NewNop())
		require.NoError(t, err)
		t.Cleanup(func() {
			require.NoError(t, tc.Shutdown(ctx))
			require.NoError(t, lc.Shutdown(ctx))
		})
	}
	create("b", true)
	create("jobs", false)
	create("a", true)
	assert.Equal(t, []component.ID{
		component.NewIDWithName(metadata.Type, "a"),
		component.NewIDWithName(metadata.Type, "b"),
	}, src.APIRequestsFromSpans())
}
