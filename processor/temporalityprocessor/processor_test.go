// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package temporalityprocessor

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/storagetest"
	"github.com/gpubuild/otelcol-gpubuild/processor/temporalityprocessor/internal/metadatatest"
)

var storageID = component.MustNewID("file_storage")

type storageHost struct {
	component.Host
	extensions map[component.ID]component.Component
}

func (h storageHost) GetExtensions() map[component.ID]component.Component { return h.extensions }

// fileStorage starts a contrib file_storage extension over dir.
func fileStorage(t testing.TB, dir string) extension.Extension {
	t.Helper()
	return storagetest.FileStorage(t, dir, false)
}

// start creates and starts a processor converting to `to` in front of next,
// with its state in ext (nil: in memory), logging to logger.
func start(t testing.TB, to string, ext extension.Extension, next consumer.Metrics, logger *zap.Logger, journalDir string) processor.Metrics {
	t.Helper()
	set := processortest.NewNopSettings(NewFactory().Type())
	if logger != nil {
		set.Logger = logger
	}
	return startWith(t, set, to, ext, next, journalDir)
}

// startWith is start with the processor's settings (its telemetry).
func startWith(t testing.TB, set processor.Settings, to string, ext extension.Extension, next consumer.Metrics, journalDir string) processor.Metrics {
	t.Helper()
	cfg := createDefaultConfig().(*Config)
	cfg.To = to
	host := component.Host(componenttest.NewNopHost())
	if ext != nil {
		cfg.State.Storage = &storageID
		cfg.State.Journal.Directory = journalDir
		host = storageHost{Host: host, extensions: map[component.ID]component.Component{storageID: ext}}
	}
	require.NoError(t, cfg.Validate())
	p, err := NewFactory().CreateMetrics(context.Background(), set, cfg, next)
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), host))
	return p
}

var begin = time.Now().Add(-10 * time.Minute).Truncate(time.Second)

func ts(i int) pcommon.Timestamp {
	return pcommon.NewTimestampFromTime(begin.Add(time.Duration(i) * time.Second))
}

// sum is one monotonic "build.jobs" point of the given temporality over
// (ts(from), ts(to)].
func sum(temporality pmetric.AggregationTemporality, from, to int, v int64) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "builder")
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("build.jobs")
	s := m.SetEmptySum()
	s.SetIsMonotonic(true)
	s.SetAggregationTemporality(temporality)
	dp := s.DataPoints().AppendEmpty()
	dp.Attributes().PutStr("build.result", "success")
	dp.SetStartTimestamp(ts(from))
	dp.SetTimestamp(ts(to))
	dp.SetIntValue(v)
	return md
}

// kill stands for kill -9: the database file is closed under the processor
// (as the process's end releases it), without its Shutdown, so a journal
// is not checkpointed.
func kill(t testing.TB, p processor.Metrics, ext extension.Extension) {
	t.Helper()
	require.NoError(t, p.(*temporalityProcessor).storage.Close(context.Background()))
	require.NoError(t, ext.Shutdown(context.Background()))
}

type point struct {
	start pcommon.Timestamp
	value int64
	delta bool
}

func points(sink *consumertest.MetricsSink) []point {
	var out []point
	for _, md := range sink.AllMetrics() {
		rms := md.ResourceMetrics()
		for i := 0; i < rms.Len(); i++ {
			s := rms.At(i).ScopeMetrics().At(0).Metrics().At(0).Sum()
			for j := 0; j < s.DataPoints().Len(); j++ {
				dp := s.DataPoints().At(j)
				out = append(out, point{dp.StartTimestamp(), dp.IntValue(), s.AggregationTemporality() == pmetric.AggregationTemporalityDelta})
			}
		}
	}
	return out
}

// The delta counter +5, a restart, +3, a restart without Shutdown (the
// process killed: the database file closed under it), +2: the cumulative
// series reads 5, 8, 10 from its first start, on the real file_storage,
// with and without the journal.
func TestCumulativeGoesOnAcrossRestarts(t *testing.T) {
	for _, journal := range []bool{false, true} {
		t.Run(map[bool]string{false: "storage", true: "journal"}[journal], func(t *testing.T) {
			dir := t.TempDir()
			journalDir := ""
			if journal {
				journalDir = dir
			}
			sink := new(consumertest.MetricsSink)
			ext := fileStorage(t, dir)
			p := start(t, ToCumulative, ext, sink, nil, journalDir)
			require.NoError(t, p.ConsumeMetrics(context.Background(), sum(pmetric.AggregationTemporalityDelta, 0, 10, 5)))
			require.NoError(t, p.Shutdown(context.Background())) // SIGTERM
			require.NoError(t, ext.Shutdown(context.Background()))

			ext = fileStorage(t, dir)
			p = start(t, ToCumulative, ext, sink, nil, journalDir)
			require.NoError(t, p.ConsumeMetrics(context.Background(), sum(pmetric.AggregationTemporalityDelta, 10, 20, 3)))
			kill(t, p, ext)

			ext = fileStorage(t, dir)
			p = start(t, ToCumulative, ext, sink, nil, journalDir)
			require.NoError(t, p.ConsumeMetrics(context.Background(), sum(pmetric.AggregationTemporalityDelta, 20, 30, 2)))
			require.NoError(t, p.Shutdown(context.Background()))
			require.NoError(t, ext.Shutdown(context.Background()))

			assert.Equal(t, []point{{ts(0), 5, false}, {ts(0), 8, false}, {ts(0), 10, false}}, points(sink))
		})
	}
}

// A counter's cumulative points 40 (since a start 10 minutes ago, before
// the collector came up), 52, a kill, 70: the deltas sent are 40, 12, 18,
// the counter's total, where an in-memory conversion sends 52-... again or
// drops the first point after each restart.
func TestDeltaGoesOnAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	sink := new(consumertest.MetricsSink)
	ext := fileStorage(t, dir)
	p := start(t, ToDelta, ext, sink, nil, dir)
	require.NoError(t, p.ConsumeMetrics(context.Background(), sum(pmetric.AggregationTemporalityCumulative, 0, 10, 40)))
	require.NoError(t, p.ConsumeMetrics(context.Background(), sum(pmetric.AggregationTemporalityCumulative, 0, 20, 52)))
	kill(t, p, ext)

	ext = fileStorage(t, dir)
	p = start(t, ToDelta, ext, sink, nil, dir)
	require.NoError(t, p.ConsumeMetrics(context.Background(), sum(pmetric.AggregationTemporalityCumulative, 0, 30, 70)))
	require.NoError(t, p.Shutdown(context.Background()))
	require.NoError(t, ext.Shutdown(context.Background()))

	assert.Equal(t, []point{{ts(0), 40, true}, {ts(10), 12, true}, {ts(20), 18, true}}, points(sink))
}

// refusing is a consumer that refuses while refuse is set.
type refusing struct {
	consumertest.MetricsSink
	refuse bool
}

func (r *refusing) ConsumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	if r.refuse {
		// What it is offered is its own: it may drop it before refusing.
		md.ResourceMetrics().RemoveIf(func(pmetric.ResourceMetrics) bool { return true })
		return errors.New("queue is full")
	}
	return r.MetricsSink.ConsumeMetrics(ctx, md)
}

// A batch the next consumer refuses is converted again as if for the first
// time when it is offered again: the total counts it once.
func TestRefusedBatchIsConvertedAgain(t *testing.T) {
	for _, to := range []string{ToCumulative, ToDelta} {
		t.Run(to, func(t *testing.T) {
			next := &refusing{}
			tt := componenttest.NewTelemetry()
			t.Cleanup(func() { _ = tt.Shutdown(context.Background()) })
			p := startWith(t, metadatatest.NewSettings(tt), to, nil, next, "")
			in := pmetric.AggregationTemporalityDelta
			values := []int64{5, 3, 3, 2} // the second batch is refused once, then offered again
			if to == ToDelta {
				in, values = pmetric.AggregationTemporalityCumulative, []int64{5, 8, 8, 10}
			}
			require.NoError(t, p.ConsumeMetrics(context.Background(), sum(in, 0, 10, values[0])))
			next.refuse = true
			from := 10
			if to == ToDelta {
				from = 0
			}
			require.Error(t, p.ConsumeMetrics(context.Background(), sum(in, from, 20, values[1])))
			next.refuse = false
			require.NoError(t, p.ConsumeMetrics(context.Background(), sum(in, from, 20, values[2])))
			if to == ToDelta {
				from = 0
			} else {
				from = 20
			}
			require.NoError(t, p.ConsumeMetrics(context.Background(), sum(in, from, 30, values[3])))
			got := points(&next.MetricsSink)
			require.Len(t, got, 3)
			if to == ToCumulative {
				assert.Equal(t, []int64{5, 8, 10}, []int64{got[0].value, got[1].value, got[2].value})
			} else {
				assert.Equal(t, []int64{5, 3, 2}, []int64{got[0].value, got[1].value, got[2].value})
			}
			// The refused batch's one point, counted although the next
			// consumer dropped it before refusing.
			metadatatest.AssertEqualTemporalityPointsRefused(t, tt, []metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())
			require.NoError(t, p.Shutdown(context.Background()))
		})
	}
}

// Without state.storage the processor says once, at start, that its state
// is in memory only and which setting keeps it.
func TestInMemoryStateIsSaidAtStart(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	p := start(t, ToCumulative, nil, new(consumertest.MetricsSink), zap.New(core), "")
	require.NoError(t, p.ConsumeMetrics(context.Background(), sum(pmetric.AggregationTemporalityDelta, 0, 10, 5)))
	require.NoError(t, p.Shutdown(context.Background()))
	warnings := logs.FilterMessageSnippet("in memory only").All()
	require.Len(t, warnings, 1)
	assert.Contains(t, warnings[0].Message, "state.storage")
}

func TestValidateNamesTheField(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.To = "sideways"
	cfg.MaxSeries = 0
	cfg.State.Journal.Directory = "/tmp/x"
	err := cfg.Validate()
	require.Error(t, err)
	for _, field := range []string{"to:", "max_series:", "state.journal.directory:"} {
		assert.Contains(t, err.Error(), field)
	}
}
