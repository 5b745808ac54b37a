// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package intervalmergeprocessor

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// TestStateGaugesAndRefusalReasons: while the next consumer refuses, the
// journal's bytes, the oldest pending interval's age and the senders kept
// are reported, and a refusal at journal.max_bytes is counted as such.
func TestStateGaugesAndRefusalReasons(t *testing.T) {
	next := &flaky{}
	next.refuse.Store(true)
	g := startGateway(t, t.TempDir(), next, func(c *Config) { c.State.Journal.MaxBytes = 4 << 10 })
	assert.Zero(t, g.oldestPendingAge(t), "nothing pending")

	require.NoError(t, g.ConsumeMetrics(context.Background(), stamped("a", 1, 1)))
	require.NoError(t, g.ConsumeMetrics(context.Background(), stamped("b", 1, 1)))
	assert.Positive(t, g.counter(t, "journal_bytes"))
	assert.Equal(t, int64(2), g.counter(t, "identities_kept"))
	g.flush(context.Background(), true)
	assert.Positive(t, g.oldestPendingAge(t), "the refused interval is pending")

	var refused error
	for i := 2; refused == nil && i < 1000; i++ {
		refused = g.ConsumeMetrics(context.Background(), stamped("a", uint64(i), 1))
	}
	require.Error(t, refused)
	assert.GreaterOrEqual(t, g.counter(t, "journal_bytes"), int64(4<<10))
	assert.Equal(t, int64(1), g.counter(t, "requests_refused"))
	assert.Equal(t, int64(1), g.counter(t, "requests_refused_journal_full"))

	next.refuse.Store(false)
	g.flush(context.Background(), true)
	assert.Zero(t, g.oldestPendingAge(t), "taken")
}

func (g *gateway) oldestPendingAge(t *testing.T) float64 {
	t.Helper()
	m, err := g.tel.GetMetric("otelcol_intervalmerge_oldest_pending_age")
	require.NoError(t, err)
	d, ok := m.Data.(metricdata.Gauge[float64])
	require.True(t, ok)
	require.Len(t, d.DataPoints, 1)
	return d.DataPoints[0].Value
}
