// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package requestidprocessor

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/gpubuild/otelcol-gpubuild/internal/requestid"
	"github.com/gpubuild/otelcol-gpubuild/processor/requestidprocessor/internal/metadata"
)

func request(resources int) pmetric.Metrics {
	md := pmetric.NewMetrics()
	for i := range resources {
		rm := md.ResourceMetrics().AppendEmpty()
		rm.Resource().Attributes().PutInt("n", int64(i))
		rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty().SetEmptyGauge().DataPoints().AppendEmpty().SetIntValue(1)
	}
	return md
}

func newStamper(t *testing.T, sink *consumertest.MetricsSink) processor.Metrics {
	t.Helper()
	p, err := NewFactory().CreateMetrics(context.Background(), processortest.NewNopSettings(metadata.Type), &Config{}, sink)
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	return p
}

// TestEveryRequestGetsItsOwnIdentity: concurrent requests each get one
// identity on every resource, sequence numbers distinct and dense, one
// instance id per processor, another for another process's processor.
func TestEveryRequestGetsItsOwnIdentity(t *testing.T) {
	sink := &consumertest.MetricsSink{}
	p := newStamper(t, sink)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				assert.NoError(t, p.ConsumeMetrics(context.Background(), request(3)))
			}
		}()
	}
	wg.Wait()
	seen := map[uint64]bool{}
	instances := map[string]bool{}
	for _, md := range sink.AllMetrics() {
		id, ok, err := requestid.Take(md)
		require.NoError(t, err, "one identity on every resource")
		require.True(t, ok)
		assert.False(t, seen[id.Sequence], "sequence %d used twice", id.Sequence)
		seen[id.Sequence] = true
		instances[id.Instance] = true
		assert.Equal(t, 3, md.ResourceMetrics().Len())
		_, has := md.ResourceMetrics().At(0).Resource().Attributes().Get(requestid.SequenceAttribute)
		assert.False(t, has, "Take removes the stamp")
	}
	assert.Len(t, seen, 800)
	for q := uint64(1); q <= 800; q++ {
		assert.True(t, seen[q])
	}
	require.Len(t, instances, 1)

	other := &consumertest.MetricsSink{}
	require.NoError(t, newStamper(t, other).ConsumeMetrics(context.Background(), request(1)))
	id, _, err := requestid.Take(other.AllMetrics()[0])
	require.NoError(t, err)
	assert.NotContains(t, instances, id.Instance, "a new process draws a new instance id")
	assert.Len(t, id.Instance, 32)
}

// TestRebatchedRequestsAreNotTrusted: requests merged after stamping carry
// two identities; the gateway is told, and a request without a stamp is
// unidentified.
func TestRebatchedRequestsAreNotTrusted(t *testing.T) {
	sink := &consumertest.MetricsSink{}
	p := newStamper(t, sink)
	require.NoError(t, p.ConsumeMetrics(context.Background(), request(1)))
	require.NoError(t, p.ConsumeMetrics(context.Background(), request(1)))
	merged := pmetric.NewMetrics()
	for _, md := range sink.AllMetrics() {
		md.ResourceMetrics().MoveAndAppendTo(merged.ResourceMetrics())
	}
	_, ok, err := requestid.Take(merged)
	assert.ErrorIs(t, err, requestid.ErrMixed)
	assert.False(t, ok)
	for i := 0; i < merged.ResourceMetrics().Len(); i++ {
		_, has := merged.ResourceMetrics().At(i).Resource().Attributes().Get(requestid.InstanceAttribute)
		assert.False(t, has, "the stamp is removed all the same")
	}
	_, ok, err = requestid.Take(request(2))
	assert.NoError(t, err)
	assert.False(t, ok)
}
