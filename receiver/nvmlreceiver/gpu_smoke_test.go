// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build gpu && cgo

package nvmlreceiver

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gpubuild/otelcol-gpubuild/receiver/nvmlreceiver/internal/metadata"
)

// TestGPUSmoke runs the receiver against the machine's real NVML and GPUs
// (make gpu-smoke): the factory-built receiver for a few 1 s intervals,
// printing every metric, then timed direct scrapes. It fails when NVML
// cannot initialize, so run it only where a GPU and driver are present.
func TestGPUSmoke(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	set := receivertest.NewNopSettings(metadata.Type)
	set.Logger = zap.New(core)

	cfg := createDefaultConfig()
	cfg.CollectionInterval = time.Second
	cfg.InitialDelay = 0

	sink := new(consumertest.MetricsSink)
	rcv, err := NewFactory().CreateMetrics(context.Background(), set, cfg, sink)
	require.NoError(t, err)
	require.NoError(t, rcv.Start(context.Background(), componenttest.NewNopHost()))
	for _, e := range logs.All() {
		if e.Level >= zapcore.WarnLevel {
			_ = rcv.Shutdown(context.Background())
			t.Fatalf("NVML did not come up: %s %v", e.Message, e.ContextMap())
		}
	}
	require.Eventually(t, func() bool { return len(sink.AllMetrics()) >= 3 }, 15*time.Second, 50*time.Millisecond)
	require.NoError(t, rcv.Shutdown(context.Background()))

	all := sink.AllMetrics()
	last := all[len(all)-1]
	require.Positive(t, last.DataPointCount(), "a scrape on a GPU machine must produce metrics")
	fmt.Printf("=== receiver log\n")
	for _, e := range logs.All() {
		fmt.Printf("%s %s %v\n", e.Level.CapitalString(), e.Message, e.ContextMap())
	}
	fmt.Printf("=== last of %d scrapes at a 1 s interval: %d resources, %d data points\n",
		len(all), last.ResourceMetrics().Len(), last.DataPointCount())
	printMetrics(last)

	// Timed scrapes straight on the scraper: NVML latency plus Go work.
	s := newGPUScraper(cfg, set)
	require.NoError(t, s.start(context.Background(), componenttest.NewNopHost()))
	defer func() { require.NoError(t, s.shutdown(context.Background())) }()
	require.NotEmpty(t, s.gpus)
	const n = 20
	var total, worst time.Duration
	for range n {
		start := time.Now()
		_, err := s.scrape(context.Background())
		d := time.Since(start)
		require.NoError(t, err)
		total += d
		worst = max(worst, d)
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Printf("=== %d direct scrapes of %d GPU(s): mean %v, max %v, mean per GPU %v\n",
		n, len(s.gpus), total/n, worst, total/n/time.Duration(len(s.gpus)))
}

func printMetrics(md pmetric.Metrics) {
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		fmt.Printf("--- resource %s\n", formatAttrs(rm.Resource().Attributes()))
		var lines []string
		for j := 0; j < rm.ScopeMetrics().Len(); j++ {
			ms := rm.ScopeMetrics().At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				var dps pmetric.NumberDataPointSlice
				kind := m.Type().String()
				if m.Type() == pmetric.MetricTypeSum {
					dps = m.Sum().DataPoints()
					kind = fmt.Sprintf("Sum(monotonic=%v)", m.Sum().IsMonotonic())
				} else {
					dps = m.Gauge().DataPoints()
				}
				for p := 0; p < dps.Len(); p++ {
					dp := dps.At(p)
					var v string
					if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
						v = fmt.Sprint(dp.IntValue())
					} else {
						v = fmt.Sprintf("%g", dp.DoubleValue())
					}
					lines = append(lines, fmt.Sprintf("    %s %s [%s] %s = %s", m.Name(), kind, m.Unit(), formatAttrs(dp.Attributes()), v))
				}
			}
		}
		sort.Strings(lines)
		fmt.Println(strings.Join(lines, "\n"))
	}
	os.Stdout.Sync()
}

func formatAttrs(m pcommon.Map) string {
	parts := make([]string, 0, m.Len())
	for k, v := range m.All() {
		parts = append(parts, k+"="+v.AsString())
	}
	sort.Strings(parts)
	return "{" + strings.Join(parts, ", ") + "}"
}
