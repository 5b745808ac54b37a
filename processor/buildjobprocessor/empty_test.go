// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package buildjobprocessor

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/gpubuild/otelcol-gpubuild/processor/buildjobprocessor/internal/metadata"
)

// A batch without data points (a scrape that found no GPU) goes no
// further; a batch with one is handed on as it came.
func TestEmptyBatchIsNotHandedOn(t *testing.T) {
	ctx := context.Background()
	sink := new(consumertest.MetricsSink)
	f := NewFactory()
	p, err := f.CreateMetrics(ctx, processortest.NewNopSettings(metadata.Type), f.CreateDefaultConfig(), sink)
	require.NoError(t, err)
	require.NoError(t, p.Start(ctx, componenttest.NewNopHost()))
	defer func() { require.NoError(t, p.Shutdown(ctx)) }()

	empty := pmetric.NewMetrics()
	m := empty.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("hw.gpu.utilization")
	m.SetEmptyGauge()
	require.NoError(t, p.ConsumeMetrics(ctx, empty))
	require.NoError(t, p.ConsumeMetrics(ctx, pmetric.NewMetrics()))
	require.Empty(t, sink.AllMetrics())

	one := pmetric.NewMetrics()
	g := one.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	g.SetName("hw.gpu.utilization")
	g.SetEmptyGauge().DataPoints().AppendEmpty().SetDoubleValue(0.5)
	require.NoError(t, p.ConsumeMetrics(ctx, one))
	require.Len(t, sink.AllMetrics(), 1)
	require.Equal(t, 1, sink.DataPointCount())
}
