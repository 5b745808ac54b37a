// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package fanoutconnector

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pipeline"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/gpubuild/otelcol-gpubuild/connector/fanoutconnector/internal/metadatatest"
)

// store is a destination that takes batches unless told to refuse; it
// records the value of each batch's one point.
type store struct {
	mu      sync.Mutex
	refuse  error
	values  []int64
	offered int
}

func (s *store) Capabilities() consumer.Capabilities { return consumer.Capabilities{MutatesData: true} }

func (s *store) ConsumeMetrics(_ context.Context, md pmetric.Metrics) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.offered++
	dp := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints().At(0)
	v := dp.IntValue()
	// A branch may rewrite what it is offered, also when it then refuses
	// it (a temporality conversion it takes back).
	dp.SetIntValue(-1)
	if consumererror.IsPermanent(s.refuse) {
		// Or drop what it will never take before saying so.
		md.ResourceMetrics().RemoveIf(func(pmetric.ResourceMetrics) bool { return true })
	}
	if s.refuse != nil {
		return s.refuse
	}
	s.values = append(s.values, v)
	return nil
}

func (s *store) set(err error) {
	s.mu.Lock()
	s.refuse = err
	s.mu.Unlock()
}

func (s *store) got() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int64(nil), s.values...)
}

func batch(v int64) pmetric.Metrics {
	md := pmetric.NewMetrics()
	m := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("build.jobs")
	m.SetEmptySum().DataPoints().AppendEmpty().SetIntValue(v)
	return md
}

func newTestFanout(t *testing.T, cfg *Config, stores ...*store) (connector.Metrics, *componenttest.Telemetry) {
	t.Helper()
	consumers := map[pipeline.ID]consumer.Metrics{}
	for i, s := range stores {
		consumers[pipeline.NewIDWithName(pipeline.SignalMetrics, string(rune('a'+i)))] = s
	}
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	set := connectortest.NewNopSettings(NewFactory().Type())
	set.TelemetrySettings = tel.NewTelemetrySettings()
	c, err := NewFactory().CreateMetricsToMetrics(context.Background(), set, cfg, connector.NewMetricsRouter(consumers))
	require.NoError(t, err)
	require.NoError(t, c.Start(context.Background(), componenttest.NewNopHost()))
	return c, tel
}

func testConfig() *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.RetryInterval = 10 * time.Millisecond
	cfg.MaxRetryInterval = 20 * time.Millisecond
	return cfg
}

// One store refusing (its queue full) while another takes every batch: the
// caller is told the batches were taken, so it sends none again; the
// refusing store gets them, in order, once it takes data again; nothing
// reaches either store twice.
func TestOneRefusalNeverResendsToTheOthers(t *testing.T) {
	a, b := &store{}, &store{}
	c, _ := newTestFanout(t, testConfig(), a, b)
	require.NoError(t, c.ConsumeMetrics(context.Background(), batch(1)))
	b.set(errors.New("sending queue is full"))
	for v := int64(2); v <= 4; v++ {
		require.NoError(t, c.ConsumeMetrics(context.Background(), batch(v)), "accepted by a: the caller must not resend")
	}
	assert.Equal(t, []int64{1, 2, 3, 4}, a.got())
	assert.Equal(t, []int64{1}, b.got())
	b.set(nil)
	require.Eventually(t, func() bool { return len(b.got()) == 4 }, 5*time.Second, 5*time.Millisecond)
	require.NoError(t, c.ConsumeMetrics(context.Background(), batch(5)))
	assert.Equal(t, []int64{1, 2, 3, 4, 5}, a.got())
	assert.Equal(t, []int64{1, 2, 3, 4, 5}, b.got(), "held batches first, in order, each once")
	require.NoError(t, c.Shutdown(context.Background()))
}

// Refused by every store: nothing was taken anywhere, so the refusal goes
// back to the caller (its retry then counts nothing twice) and nothing is held.
func TestRefusedEverywhereIsRefusedUpstream(t *testing.T) {
	a, b := &store{refuse: errors.New("full")}, &store{refuse: errors.New("full")}
	c, _ := newTestFanout(t, testConfig(), a, b)
	require.Error(t, c.ConsumeMetrics(context.Background(), batch(1)))
	a.set(nil)
	b.set(nil)
	require.NoError(t, c.ConsumeMetrics(context.Background(), batch(1)))
	require.NoError(t, c.Shutdown(context.Background()))
	assert.Equal(t, []int64{1}, a.got())
	assert.Equal(t, []int64{1}, b.got())
}

// Past hold_max_points a refusing store loses batches, counted for it
// alone; a permanent refusal is never held. The others are untouched.
func TestLossIsCountedPerPipeline(t *testing.T) {
	cfg := testConfig()
	cfg.HoldMaxPoints = 2
	a, b := &store{}, &store{refuse: errors.New("full")}
	c, tel := newTestFanout(t, cfg, a, b)
	for v := int64(1); v <= 3; v++ {
		require.NoError(t, c.ConsumeMetrics(context.Background(), batch(v)))
	}
	b.set(consumererror.NewPermanent(errors.New("bad request")))
	require.NoError(t, c.ConsumeMetrics(context.Background(), batch(4)))
	require.NoError(t, c.Shutdown(context.Background()))
	assert.Equal(t, []int64{1, 2, 3, 4}, a.got())
	assert.Empty(t, b.got())

	// b refused 1 and 2 (held), 3 (past the hold: dropped), then refused
	// 1, 2 and 4 for good.
	metadatatest.AssertEqualFanoutPointsDropped(t, tel, []metricdata.DataPoint[int64]{
		{Attributes: attribute.NewSet(attribute.String("pipeline", "metrics/b"), attribute.String("reason", "hold_full")), Value: 1},
		{Attributes: attribute.NewSet(attribute.String("pipeline", "metrics/b"), attribute.String("reason", "refused_permanently")), Value: 3},
	}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualFanoutRefusals(t, tel, []metricdata.DataPoint[int64]{
		{Attributes: attribute.NewSet(attribute.String("pipeline", "metrics/b")), Value: 2},
	}, metricdatatest.IgnoreTimestamp())
}
