// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package seriesbudget

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/benchmem"
)

func dims(job uint64) func() []Dimension {
	return func() []Dimension { return []Dimension{{"service.name", 1}, {"job.id", job}} }
}

func TestBudgetFoldsPastTheLimitAndNamesTheDimension(t *testing.T) {
	b := New(3, time.Hour, time.Minute)
	now := time.Unix(1000, 0)
	for s := uint64(1); s <= 3; s++ {
		ok, o := b.Admit("jobs", s, now, dims(s))
		require.True(t, ok)
		require.Nil(t, o)
	}
	ok, o := b.Admit("jobs", 4, now, dims(4))
	assert.False(t, ok)
	require.NotNil(t, o)
	assert.Equal(t, Overflow{Metric: "jobs", Series: 3, Dimension: "job.id", Distinct: 3}, *o)

	ok, o = b.Admit("jobs", 5, now.Add(time.Second), dims(5))
	assert.False(t, ok)
	assert.Nil(t, o, "the warning is rate limited")
	ok, _ = b.Admit("jobs", 2, now.Add(time.Second), dims(2))
	assert.True(t, ok, "a known series stays itself")
	ok, _ = b.Admit("other", 4, now, dims(4))
	assert.True(t, ok, "each metric has its own budget")

	ok, o = b.Admit("jobs", 6, now.Add(2*time.Minute), dims(6))
	assert.False(t, ok)
	assert.NotNil(t, o, "warned again after warnEvery")
}

func TestBudgetForgetsIdleSeries(t *testing.T) {
	b := New(2, time.Hour, time.Minute)
	now := time.Unix(1000, 0)
	b.Admit("m", 1, now, dims(1))
	b.Admit("m", 2, now.Add(50*time.Minute), dims(2))
	ok, _ := b.Admit("m", 3, now.Add(61*time.Minute), dims(3))
	assert.True(t, ok, "series 1 idle past the TTL frees its place")
	assert.Equal(t, 2, b.Series("m"))
}

// BenchmarkBudgetMemory reports the heap the budget keeps per admitted
// series, for 5,000 series (the exporter's default budget) of one metric
// with two dimensions, one of them distinct per series.
// A metric name that is not seen again (an id in the name) is forgotten
// with its series, so that names coming and going do not grow the budget's
// memory without end.
func TestBudgetForgetsIdleMetrics(t *testing.T) {
	b := New(5, time.Hour, time.Minute)
	now := time.Unix(1000, 0)
	for i := range 1000 {
		ok, _ := b.Admit(fmt.Sprintf("job.%d.duration", i), 1, now, dims(1))
		require.True(t, ok)
	}
	ok, _ := b.Admit("steady", 1, now, dims(1))
	require.True(t, ok)
	assert.Equal(t, 1001, len(b.metrics))

	// Every metric is swept at most every TTL/4 (15 minutes here).
	ok, _ = b.Admit("steady", 1, now.Add(50*time.Minute), dims(1))
	require.True(t, ok)
	assert.Equal(t, 1001, len(b.metrics), "none idle past the TTL yet")
	ok, _ = b.Admit("new", 1, now.Add(66*time.Minute), dims(1))
	require.True(t, ok)
	assert.Equal(t, 2, len(b.metrics), "the idle names are gone, the steady one and the new one stay")
	assert.Equal(t, 1, b.Series("steady"))
}

func BenchmarkBudgetMemory(b *testing.B) {
	const series = 5000
	now := time.Unix(1000, 0)
	var perSeries float64
	for b.Loop() {
		perSeries = float64(benchmem.Retained(func() any {
			budget := New(series, time.Hour, time.Minute)
			for s := uint64(1); s <= series; s++ {
				if ok, _ := budget.Admit("jobs", s, now, dims(s)); !ok {
					b.Fatalf("series %d refused", s)
				}
			}
			return budget
		})) / series
	}
	b.ReportMetric(perSeries, "heap_bytes/series")
}
