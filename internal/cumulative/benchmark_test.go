// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cumulative

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/benchmem"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/storagetest"
)

// sumBatch is one resource with n cumulative sum series.
func sumBatch(n int, start, ts pcommon.Timestamp, step int64) pmetric.Metrics {
	md := pmetric.NewMetrics()
	sum := newMetric(md, "requests", "{request}").SetEmptySum()
	sum.SetIsMonotonic(true)
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	for i := range n {
		dp := sum.DataPoints().AppendEmpty()
		dp.SetStartTimestamp(start)
		dp.SetTimestamp(ts)
		dp.SetIntValue(step * int64(i+1))
		dp.Attributes().PutStr("series", fmt.Sprint(i))
	}
	return md
}

// histogramBatch is n cumulative "latency" histogram series at ts, all
// with the OpenTelemetry SDKs' default bounds (15 bounds, 16 buckets).
func histogramBatch(n int, ts time.Duration, step uint64) pmetric.Metrics {
	bounds := []float64{0, 5, 10, 25, 50, 75, 100, 250, 500, 750, 1000, 2500, 5000, 7500, 10000}
	points := make([]histogramPoint, n)
	for i := range points {
		counts := make([]uint64, len(bounds)+1)
		for j := range counts {
			counts[j] = step * uint64(i+j+1)
		}
		points[i] = histogramPoint{fmt.Sprint(i), bounds, counts}
	}
	return histograms(ts, points...)
}

// benchmarkKind builds n series of one kind at ts, each step times its
// index apart.
type benchmarkKind struct {
	name  string
	batch func(n int, ts time.Duration, step int) pmetric.Metrics
}

// benchmarkKinds are sums and histograms, started an hour before testNow.
func benchmarkKinds() []benchmarkKind {
	start := at(-time.Hour)
	return []benchmarkKind{
		{"sum", func(n int, ts time.Duration, step int) pmetric.Metrics {
			return sumBatch(n, start, at(ts), int64(step))
		}},
		{"histogram", func(n int, ts time.Duration, step int) pmetric.Metrics {
			return histogramBatch(n, ts, uint64(step))
		}},
	}
}

// BenchmarkStateMemory reports the heap the tracker keeps per series once
// 10,000 series are tracked (two points each, so both snapshots are in
// use), and the objects it keeps them in (each one a collection marks).
func BenchmarkStateMemory(b *testing.B) {
	const series = 10_000
	for _, kind := range benchmarkKinds() {
		b.Run(kind.name, func(b *testing.B) {
			var bytes, objects int64
			for b.Loop() {
				m1 := kind.batch(series, 0, 1)
				m2 := kind.batch(series, time.Minute, 2)
				bytes, objects = benchmem.RetainedWithObjects(func() any {
					c := New(Config{TTL: time.Hour, MaxSeries: 1 << 20}, nil)
					var r Result
					c.Convert(context.Background(), m1, testNow, &r)
					r.Reset()
					c.Convert(context.Background(), m2, testNow, &r)
					return c
				})
				runtime.KeepAlive(m1)
				runtime.KeepAlive(m2)
			}
			b.ReportMetric(float64(bytes)/series, "heap_bytes/series")
			b.ReportMetric(float64(objects)/series, "objects/series")
		})
	}
}

// BenchmarkSavedBytes reports what the storage holds per series once
// 10,000 series are saved with two points each: the entries' values, and
// their keys too (what file_storage rewrites when the series move on).
func BenchmarkSavedBytes(b *testing.B) {
	const series = 10_000
	for _, kind := range benchmarkKinds() {
		b.Run(kind.name, func(b *testing.B) {
			m1, m2 := kind.batch(series, 0, 1), kind.batch(series, time.Minute, 2)
			var values, withKeys int
			for b.Loop() {
				client := storagetest.NewClient(nil)
				c := New(Config{TTL: time.Hour, MaxSeries: 1 << 20}, nil)
				c.Attach(context.Background(), client, testNow)
				for _, md := range []pmetric.Metrics{m1, m2} {
					var r Result
					md := cloneMetrics(md)
					c.Convert(context.Background(), md, testNow, &r)
					if err := c.Save(context.Background(), r.Records); err != nil {
						b.Fatal(err)
					}
				}
				values, withKeys = 0, 0
				for k, v := range client.Data() {
					values += len(v)
					withKeys += len(k) + len(v)
				}
			}
			b.ReportMetric(float64(values)/series, "value_bytes/series")
			b.ReportMetric(float64(withKeys)/series, "entry_bytes/series")
		})
	}
}

func cloneMetrics(md pmetric.Metrics) pmetric.Metrics {
	out := pmetric.NewMetrics()
	md.CopyTo(out)
	return out
}
