// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter

import (
	"context"
	"io/fs"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"golang.org/x/sys/unix"

	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/metadatatest"
)

// startOnDisk starts an exporter whose persistent sending queue is on d.
func startOnDisk(t *testing.T, d *disk, tweak func(*Config)) (*testExporter, *observer.ObservedLogs) {
	t.Helper()
	server := startServer(t)
	cfg := testConfig()
	cfg.Region = "eu-west-1"
	cfg.Endpoint = server.Endpoint()
	cfg.BackOffConfig.InitialInterval = 5 * time.Millisecond
	cfg.BackOffConfig.MaxInterval = 50 * time.Millisecond
	cfg.QueueConfig.Get().StorageID = &queueStorageID
	if tweak != nil {
		tweak(cfg)
	}
	require.NoError(t, cfg.Validate())
	core, logs := observer.New(zap.InfoLevel)
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tt.Shutdown(context.Background()) })
	set := metadatatest.NewSettings(tt)
	set.Logger = zap.New(core)
	exp, err := NewFactory().CreateMetrics(context.Background(), set, cfg)
	require.NoError(t, err)
	host := storageHost{Host: componenttest.NewNopHost(), extensions: map[component.ID]component.Component{
		queueStorageID: &diskStorage{disk: d},
	}}
	require.NoError(t, exp.Start(context.Background(), host))
	te := &testExporter{metricsExporter: exp.(*metricsExporter), server: server, telemetry: tt}
	t.Cleanup(func() { _ = te.stop() })
	return te, logs
}

func (d *disk) fail(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.batchErr = err
}

// requestsWithGauge is a cumulative requests point and n gauge points.
func requestsWithGauge(start, now pcommon.Timestamp, value int64, n int) pmetric.Metrics {
	md := cumulativeSum(start, now, value, nil)
	g := newMetric(md, "load", "1").SetEmptyGauge().DataPoints()
	for i := range n {
		dp := g.AppendEmpty()
		dp.SetTimestamp(now)
		dp.SetDoubleValue(1)
		dp.Attributes().PutInt("i", int64(i))
	}
	return md
}

// The queue's disk is full: what the queue cannot write is held in memory
// up to write_failure_buffer_bytes and acknowledged; past it data is
// refused with a retryable error and its cumulative conversion undone; the
// failure is logged at error naming the directory and counted by reason.
// Once the disk takes writes again, everything held is queued in order and
// sent once, and the cumulative deltas add up exactly.
func TestFullDiskHoldsDataInMemoryWithinABound(t *testing.T) {
	d := newDisk()
	begin := time.Now().Add(-time.Minute)
	at := func(i int) pcommon.Timestamp {
		return pcommon.NewTimestampFromTime(begin.Add(time.Duration(i) * time.Second))
	}
	const gauges = 50
	one := int64((&pmetric.ProtoMarshaler{}).MetricsSize(requestsWithGauge(at(0), at(1), 10, gauges)))
	te, logs := startOnDisk(t, d, func(cfg *Config) { cfg.WriteFailureBufferBytes = 2*one + one/2 })

	d.fail(&fs.PathError{Op: "write", Path: "/var/lib/otelcol-gpubuild/queue/exporter_cloudwatch__metrics", Err: syscall.ENOSPC})
	require.NoError(t, te.ConsumeMetrics(context.Background(), requestsWithGauge(at(0), at(1), 10, gauges)), "held")
	require.NoError(t, te.ConsumeMetrics(context.Background(), requestsWithGauge(at(0), at(2), 30, gauges)), "held")
	err := te.ConsumeMetrics(context.Background(), requestsWithGauge(at(0), at(3), 60, gauges))
	require.Error(t, err, "past the bound the data is refused")
	assert.False(t, consumererror.IsPermanent(err), "with a retryable error")
	assert.Contains(t, err.Error(), "/var/lib/otelcol-gpubuild/queue")
	assert.Equal(t, 2*one, te.held.Bytes())

	errorLines := logs.FilterLevelExact(zap.ErrorLevel).FilterMessageSnippet("cannot write to its storage").All()
	require.Len(t, errorLines, 1, "logged once when writes start failing")
	assert.Equal(t, "/var/lib/otelcol-gpubuild/queue", errorLines[0].ContextMap()["directory"])
	assert.Equal(t, "no_space", errorLines[0].ContextMap()["reason"])
	assert.Equal(t, map[string]int64{"no_space/held": 2 * (gauges + 1), "no_space/refused": gauges + 1}, writeFailures(t, te))

	// Room again: the held data goes into the queue without waiting for
	// another request, then the next request follows it.
	d.fail(nil)
	require.Eventually(t, func() bool { return te.held.Len() == 0 }, 20*time.Second, 10*time.Millisecond)
	require.NoError(t, te.ConsumeMetrics(context.Background(), requestsWithGauge(at(0), at(4), 100, gauges)))
	require.NoError(t, te.stop())

	var deltas []float64
	loads := 0
	for _, dd := range te.server.Datums() {
		switch dd.MetricName {
		case "requests":
			deltas = append(deltas, *dd.Value)
		case "load":
			loads++
		}
	}
	assert.Equal(t, []float64{10, 20, 70}, deltas, "in order; the refused point's increment is in the next one's")
	assert.Equal(t, 3*gauges, loads, "the gauges of the three accepted requests, once each")
	assert.Len(t, logs.FilterMessageSnippet("writes to its storage again").All(), 1)
}

// Held data the disk still refuses at shutdown is counted and logged as lost.
func TestHeldDataStillUnwritableAtShutdownIsReported(t *testing.T) {
	d := newDisk()
	// The failed write left the queue counting a request it does not hold
	// (exporterhelper), so the drain would wait for its whole timeout.
	te, logs := startOnDisk(t, d, func(cfg *Config) { cfg.ShutdownDrainTimeout = 100 * time.Millisecond })
	d.fail(&fs.PathError{Op: "write", Path: "/q/file", Err: syscall.EIO})
	now := pcommon.NewTimestampFromTime(time.Now())
	require.NoError(t, te.ConsumeMetrics(context.Background(), requestsWithGauge(now, now, 5, 9)))
	require.NoError(t, te.stop())
	lost := logs.FilterLevelExact(zap.ErrorLevel).FilterMessageSnippet("lost at shutdown").All()
	require.Len(t, lost, 1)
	assert.Equal(t, int64(10), lost[0].ContextMap()["data_points"])
	assert.Equal(t, map[string]int64{"io_error/held": 10, "io_error/lost": 10}, writeFailures(t, te))
}

// writeFailures sums queue_write_failures per reason/outcome.
func writeFailures(t *testing.T, te *testExporter) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	m, err := te.telemetry.GetMetric("otelcol_exporter_cloudwatch_queue_write_failures")
	require.NoError(t, err)
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		reason, _ := dp.Attributes.Value("reason")
		outcome, _ := dp.Attributes.Value("outcome")
		out[reason.AsString()+"/"+outcome.AsString()] += dp.Value
	}
	return out
}

// A queue capped in bytes beyond the size of its volume is said at start,
// naming the directory; a cap the volume holds says nothing.
func TestQueueCapLargerThanItsVolumeIsWarnedAbout(t *testing.T) {
	dir := t.TempDir()
	var st unix.Statfs_t
	require.NoError(t, unix.Statfs(dir, &st))
	volume := int64(st.Blocks) * st.Bsize
	for name, tc := range map[string]struct {
		queueCap int64
		warned   bool
	}{
		"cap beyond the volume": {queueCap: volume + 1, warned: true},
		"cap the volume holds":  {queueCap: 1 << 20, warned: false},
	} {
		t.Run(name, func(t *testing.T) {
			_, logs := startOnDisk(t, newDisk(), func(cfg *Config) {
				q := cfg.QueueConfig.Get()
				q.Sizer, q.QueueSize = exporterhelper.RequestSizerTypeBytes, tc.queueCap
				cfg.WriteReserveDirectory, cfg.WriteReserveBytes = dir, 4<<20
			})
			found := logs.FilterMessageSnippet("The queue's volume is smaller than the queue's byte cap").All()
			if !tc.warned {
				assert.Empty(t, found)
				return
			}
			require.Len(t, found, 1)
			assert.Equal(t, zap.WarnLevel, found[0].Level)
			fields := found[0].ContextMap()
			assert.Equal(t, dir, fields["directory"])
			assert.Equal(t, volume, fields["volume_bytes"])
			assert.Equal(t, tc.queueCap, fields["queue_size_bytes"])
		})
	}
}
