// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package buildjobprocessor

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/embedded"
	"go.opentelemetry.io/otel/metric/noop"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gpubuild/otelcol-gpubuild/connector/buildjobconnector"
)

// callbacks is a MeterProvider that counts the callbacks registered on its
// meters and not unregistered yet.
type callbacks struct {
	noop.MeterProvider
	mu   sync.Mutex
	live int
}

func (c *callbacks) Meter(string, ...metric.MeterOption) metric.Meter { return callbackMeter{c: c} }

func (c *callbacks) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.live
}

type callbackMeter struct {
	noop.Meter
	c *callbacks
}

func (m callbackMeter) RegisterCallback(metric.Callback, ...metric.Observable) (metric.Registration, error) {
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	m.c.live++
	return &registration{c: m.c}, nil
}

type registration struct {
	embedded.Registration
	c    *callbacks
	once sync.Once
}

func (r *registration) Unregister() error {
	r.once.Do(func() {
		r.c.mu.Lock()
		defer r.c.mu.Unlock()
		r.c.live--
	})
	return nil
}

// The processor's own counters are read through callbacks; shut down, it
// leaves none behind, whether it derived or stood down beside a connector
// counting api.requests from spans (a collector that reloads its
// configuration would otherwise pile them up).
func TestShutdownUnregistersItsCounters(t *testing.T) {
	for _, standDown := range []bool{false, true} {
		ctx := context.Background()
		cf := buildjobconnector.NewFactory()
		ccfg := cf.CreateDefaultConfig().(*buildjobconnector.Config)
		ccfg.APIRequestsFromSpans = standDown
		conn, err := cf.CreateTracesToMetrics(ctx, connectortest.NewNopSettings(cf.Type()), ccfg, consumertest.NewNop())
		require.NoError(t, err)

		pf := NewFactory()
		set := processortest.NewNopSettings(pf.Type())
		meters := &callbacks{}
		set.MeterProvider = meters
		core, logs := observer.New(zap.InfoLevel)
		set.Logger = zap.New(core)
		proc, err := pf.CreateMetrics(ctx, set, pf.CreateDefaultConfig(), consumertest.NewNop())
		require.NoError(t, err)
		require.Positive(t, meters.count(), "registered at creation")
		require.NoError(t, proc.Start(ctx, collectorHost{Host: componenttest.NewNopHost(), connectors: cf}))
		stoodDown := len(logs.FilterMessageSnippet("derives nothing").All()) == 1
		require.Equal(t, standDown, stoodDown)
		require.NoError(t, proc.Shutdown(ctx))
		require.NoError(t, conn.Shutdown(ctx))
		assert.Zero(t, meters.count(), "stood down: %v", standDown)
	}
}
