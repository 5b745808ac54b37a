// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package temporalityprocessor

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor/processortest"
)

// BenchmarkRestampWindow times the window in which a kill repeats a
// batch's conversion after the restart: from the next consumer taking the
// batch (a fleet sidecar's persistent queue, its request stamped) to the
// journal record of the state it moved. A fleet sidecar killed in it sends
// that batch's increase again under its next process's instance id.
// Cumulative to delta in file_storage through the journal, as
// GPUBUILD_DESTINATIONS configures it, without and with fsync
// (GPUBUILD_STATE_FSYNC). Reports the median and 99th percentile (µs).
func BenchmarkRestampWindow(b *testing.B) {
	for _, series := range []int{1, 100} {
		for _, fsync := range []bool{false, true} {
			b.Run(fmt.Sprintf("series=%d/fsync=%v", series, fsync), func(b *testing.B) {
				dir := b.TempDir()
				ext := fileStorage(b, dir)
				var taken time.Time
				next, err := consumer.NewMetrics(func(context.Context, pmetric.Metrics) error {
					taken = time.Now()
					return nil
				})
				require.NoError(b, err)
				cfg := createDefaultConfig().(*Config)
				cfg.To = ToDelta
				cfg.State.Storage = &storageID
				cfg.State.Journal.Directory = dir
				cfg.State.Journal.Fsync = fsync
				p, err := NewFactory().CreateMetrics(context.Background(), processortest.NewNopSettings(NewFactory().Type()), cfg, next)
				require.NoError(b, err)
				host := storageHost{Host: componenttest.NewNopHost(), extensions: map[component.ID]component.Component{storageID: ext}}
				require.NoError(b, p.Start(context.Background(), host))
				defer func() {
					require.NoError(b, p.Shutdown(context.Background()))
					require.NoError(b, ext.Shutdown(context.Background()))
				}()
				t0 := time.Now().Add(-time.Hour)
				var windows []time.Duration
				i := 0
				for b.Loop() {
					i++
					md := seriesBatch(series, pmetric.AggregationTemporalityCumulative,
						pcommon.NewTimestampFromTime(t0), pcommon.NewTimestampFromTime(t0.Add(time.Duration(i)*time.Millisecond)), int64(i))
					require.NoError(b, p.ConsumeMetrics(context.Background(), md))
					windows = append(windows, time.Since(taken))
				}
				slices.Sort(windows)
				b.ReportMetric(float64(windows[len(windows)/2].Microseconds()), "p50_us")
				b.ReportMetric(float64(windows[len(windows)*99/100].Microseconds()), "p99_us")
			})
		}
	}
}
