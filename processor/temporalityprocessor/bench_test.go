// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package temporalityprocessor

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// seriesBatch is one resource with n monotonic sum series of the given
// temporality, each at value v over (from, to].
func seriesBatch(n int, temporality pmetric.AggregationTemporality, from, to pcommon.Timestamp, v int64) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "builder")
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("build.stage.runs")
	s := m.SetEmptySum()
	s.SetIsMonotonic(true)
	s.SetAggregationTemporality(temporality)
	for i := range n {
		dp := s.DataPoints().AppendEmpty()
		dp.Attributes().PutStr("series", fmt.Sprint(i))
		dp.SetStartTimestamp(from)
		dp.SetTimestamp(to)
		dp.SetIntValue(v)
	}
	return md
}

// BenchmarkConvert converts batches of 1,000 series (a sidecar's flush is
// about 100-300), handed to a consumer that takes them, with the state in
// memory, and saved in file_storage through the journal (as
// GPUBUILD_DESTINATIONS configures it). Reports points/s and the bytes one
// save of the 1,000 series writes (keys and values).
func BenchmarkConvert(b *testing.B) {
	const series = 1000
	for _, to := range []string{ToCumulative, ToDelta} {
		for _, stored := range []bool{false, true} {
			b.Run(fmt.Sprintf("to=%s/storage=%v", to, map[bool]string{false: "memory", true: "file_storage+journal"}[stored]), func(b *testing.B) {
				dir := b.TempDir()
				var ext extension.Extension
				var journal string
				if stored {
					ext, journal = fileStorage(b, dir), dir
				}
				p := start(b, to, ext, consumertest.NewNop(), nil, journal)
				defer func() {
					require.NoError(b, p.Shutdown(context.Background()))
					if ext != nil {
						require.NoError(b, ext.Shutdown(context.Background()))
					}
				}()
				in, v := pmetric.AggregationTemporalityDelta, int64(1)
				if to == ToDelta {
					in = pmetric.AggregationTemporalityCumulative
				}
				t0 := time.Now().Add(-time.Hour)
				md := seriesBatch(series, in, 0, 0, 0)
				sum := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum()
				i := 0
				for b.Loop() {
					// The same batch again, as the next interval's input (the
					// conversion rewrote it in place).
					i++
					from := pcommon.NewTimestampFromTime(t0.Add(time.Duration(i-1) * time.Millisecond))
					if to == ToDelta {
						from, v = pcommon.NewTimestampFromTime(t0), int64(i)
					}
					ts := pcommon.NewTimestampFromTime(t0.Add(time.Duration(i) * time.Millisecond))
					sum.SetAggregationTemporality(in)
					dps := sum.DataPoints()
					for j := range dps.Len() {
						dp := dps.At(j)
						dp.SetStartTimestamp(from)
						dp.SetTimestamp(ts)
						dp.SetIntValue(v)
					}
					if err := p.ConsumeMetrics(context.Background(), md); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(b.N*series)/b.Elapsed().Seconds(), "points/s")
				if stored {
					b.ReportMetric(float64(p.(*temporalityProcessor).tracker.LargestSaveBytes()), "saved_bytes/1000_series")
				}
			})
		}
	}
}
