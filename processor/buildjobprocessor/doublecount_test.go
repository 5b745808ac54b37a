package buildjobprocessor

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/gpubuild/otelcol-gpubuild/connector/buildjobconnector"
)

// collectorHost hands out the factories of one collector, as the service's
// host does.
type collectorHost struct {
	component.Host
	connectors connector.Factory
}

func (h collectorHost) GetFactory(kind component.Kind, typ component.Type) component.Factory {
	if kind == component.KindConnector && typ == h.connectors.Type() {
		return h.connectors
	}
	return nil
}

// startBoth creates a buildjob connector (api_requests_from_spans as given)
// and a buildjob processor in one collector and starts the processor.
func startBoth(t *testing.T, apiFromSpans bool) error {
	t.Helper()
	ctx := context.Background()
	cf := buildjobconnector.NewFactory()
	ccfg := cf.CreateDefaultConfig().(*buildjobconnector.Config)
	ccfg.APIRequestsFromSpans = apiFromSpans
	cset := connectortest.NewNopSettings(cf.Type())
	cset.ID = component.NewIDWithName(cf.Type(), "spans")
	conn, err := cf.CreateTracesToMetrics(ctx, cset, ccfg, consumertest.NewNop())
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, conn.Shutdown(ctx)) })

	pf := NewFactory()
	pset := processortest.NewNopSettings(pf.Type())
	proc, err := pf.CreateMetrics(ctx, pset, pf.CreateDefaultConfig(), consumertest.NewNop())
	require.NoError(t, err)
	err = proc.Start(ctx, collectorHost{Host: componenttest.NewNopHost(), connectors: cf})
	if err == nil {
		require.NoError(t, proc.Shutdown(ctx))
	}
	return err
}

func TestStartRefusesConnectorCountingAPIRequestsFromSpans(t *testing.T) {
	err := startBoth(t, true)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `processor "buildjob"`)
	assert.Contains(t, err.Error(), `connector "buildjob/spans"`)
	assert.Contains(t, err.Error(), "api_requests_from_spans")
}

func TestStartsBesideConnectorCountingJobsOnly(t *testing.T) {
	require.NoError(t, startBoth(t, false))
}
