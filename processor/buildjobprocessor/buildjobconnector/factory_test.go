package buildjobconnector

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
)

func TestNewFactory(t *testing.T) {
	f := NewFactory()
	assert.Equal(t, component.MustNewType("buildjob"), f.Type())
	set := connectortest.NewNopSettings(f.Type())
	c, err := f.CreateTracesToMetrics(context.Background(), set, f.CreateDefaultConfig(), consumertest.NewNop())
	require.NoError(t, err)
	require.NoError(t, c.Shutdown(context.Background()))
}
