// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package intervalmergeprocessor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gpubuild/otelcol-gpubuild/internal/requestid"
	"github.com/gpubuild/otelcol-gpubuild/processor/intervalmergeprocessor/internal/metadatatest"
	"github.com/gpubuild/otelcol-gpubuild/processor/intervalmergeprocessor/internal/statedir"
)

// gateway is one intervalmerge processor on a journal directory, with its
// telemetry and logs.
type gateway struct {
	*mergeProcessor
	tel  *componenttest.Telemetry
	logs *observer.ObservedLogs
}

func startGateway(t *testing.T, dir string, next consumer.Metrics, edit ...func(*Config)) *gateway {
	t.Helper()
	cfg := createDefaultConfig()
	cfg.Interval = time.Hour // flushed by the tests
	cfg.State.Journal.Directory = dir
	for _, e := range edit {
		e(cfg)
	}
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	set := metadatatest.NewSettings(tel)
	core, logs := observer.New(zap.InfoLevel)
	set.Logger = zap.New(core)
	p, err := newMergeProcessor(set, cfg, next)
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	return &gateway{mergeProcessor: p, tel: tel, logs: logs}
}

// kill stops the processor as SIGKILL would: no flush, no close; what it
// wrote stays as it is.
func (g *gateway) kill() {
	g.mu.Lock()
	g.stopped = true
	g.mu.Unlock()
	close(g.stop)
	g.wg.Wait()
}

func (g *gateway) counter(t *testing.T, name string) int64 {
	t.Helper()
	m, err := g.tel.GetMetric("otelcol_intervalmerge_" + name)
	if err != nil {
		return 0
	}
	var n int64
	if d, ok := m.Data.(metricdata.Sum[int64]); ok {
		for _, dp := range d.DataPoints {
			n += dp.Value
		}
	}
	return n
}

// stamped is a sidecar's request: build.jobs = v, stamped instance/seq.
func stamped(instance string, seq uint64, v int64) pmetric.Metrics {
	md := deltaJobs(instance, v)
	requestid.Stamp(md, requestid.ID{Instance: instance, Sequence: seq})
	return md
}

func total(sink *consumertest.MetricsSink) int64 {
	var n int64
	for _, md := range sink.AllMetrics() {
		n += sumOf(md)
	}
	return n
}

func segments(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "journal_processor_intervalmerge__receipts_*"))
	require.NoError(t, err)
	return m
}

// TestAcknowledgedOnDurableReceipt: with a journal, a request is answered
// at once (the interval is an hour), after it was written; a gateway killed
// before the interval was handed on leaves it on disk, and the next start
// hands it on: every acknowledged count once.
func TestAcknowledgedOnDurableReceipt(t *testing.T) {
	dir := t.TempDir()
	sink := &consumertest.MetricsSink{}
	g := startGateway(t, dir, sink)
	for i := range 20 {
		require.NoError(t, g.ConsumeMetrics(context.Background(), stamped("sidecar-a", uint64(i+1), int64(i+1))))
	}
	assert.Empty(t, sink.AllMetrics(), "acknowledged before any interval was handed on")
	segs := segments(t, dir)
	require.Len(t, segs, 1)
	st, err := os.Stat(segs[0])
	require.NoError(t, err)
	assert.Greater(t, st.Size(), int64(20*50), "every request is in the journal")

	g.kill()
	after := &consumertest.MetricsSink{}
	g2 := startGateway(t, dir, after)
	require.Eventually(t, func() bool { return total(after) == 210 }, 5*time.Second, 10*time.Millisecond, "1+...+20 handed on once after the restart")
	require.Eventually(t, func() bool { return len(segments(t, dir)) <= 1 }, 5*time.Second, 10*time.Millisecond)
	// Retries of the requests acknowledged before the kill are repeats.
	for i := range 20 {
		require.NoError(t, g2.ConsumeMetrics(context.Background(), stamped("sidecar-a", uint64(i+1), int64(i+1))))
	}
	g2.flush(context.Background(), true)
	assert.Equal(t, int64(210), total(after))
	assert.Equal(t, int64(20), g2.counter(t, "requests_duplicate"))
}

// TestRepeatIsMergedOnce: a request sent again (a retry after a timeout or
// a reset) is dropped whether its first copy is still in the open interval,
// was handed on, or was acknowledged by a process killed since, before or
// after it handed the interval on.
func TestRepeatIsMergedOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		// between runs between the first copy and the repeat.
		between func(t *testing.T, g *gateway, dir string, sink *consumertest.MetricsSink) *gateway
	}{
		{"in the open interval", func(_ *testing.T, g *gateway, _ string, _ *consumertest.MetricsSink) *gateway { return g }},
		{"handed on", func(_ *testing.T, g *gateway, _ string, _ *consumertest.MetricsSink) *gateway {
			g.flush(context.Background(), true)
			return g
		}},
		{"gateway killed before handing on", func(t *testing.T, g *gateway, dir string, sink *consumertest.MetricsSink) *gateway {
			g.kill()
			return startGateway(t, dir, sink)
		}},
		{"gateway killed after handing on", func(t *testing.T, g *gateway, dir string, sink *consumertest.MetricsSink) *gateway {
			g.flush(context.Background(), true)
			g.kill()
			return startGateway(t, dir, sink)
		}},
		{"gateway stopped", func(t *testing.T, g *gateway, dir string, sink *consumertest.MetricsSink) *gateway {
			require.NoError(t, g.Shutdown(context.Background()))
			return startGateway(t, dir, sink)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			sink := &consumertest.MetricsSink{}
			g := startGateway(t, dir, sink)
			require.NoError(t, g.ConsumeMetrics(context.Background(), stamped("a", 1, 1)))
			require.NoError(t, g.ConsumeMetrics(context.Background(), stamped("a", 2, 10)))
			require.NoError(t, g.ConsumeMetrics(context.Background(), stamped("b", 1, 100)))
			g = tc.between(t, g, dir, sink)
			require.NoError(t, g.ConsumeMetrics(context.Background(), stamped("a", 2, 10)), "a repeat is acknowledged")
			require.NoError(t, g.ConsumeMetrics(context.Background(), stamped("b", 1, 100)))
			require.NoError(t, g.ConsumeMetrics(context.Background(), stamped("a", 3, 1000)), "the next request is new")
			g.flush(context.Background(), true)
			assert.Equal(t, int64(1111), total(sink))
			assert.Equal(t, int64(2), g.counter(t, "requests_duplicate"))
		})
	}
}

// TestStampRemovedBeforeMerging: two sidecars' stamped requests of the same
// series merge into one point without the stamp.
func TestStampRemovedBeforeMerging(t *testing.T) {
	sink := &consumertest.MetricsSink{}
	g := startGateway(t, t.TempDir(), sink)
	require.NoError(t, g.ConsumeMetrics(context.Background(), stamped("a", 1, 2)))
	require.NoError(t, g.ConsumeMetrics(context.Background(), stamped("b", 1, 3)))
	g.flush(context.Background(), true)
	require.Len(t, sink.AllMetrics(), 1)
	md := sink.AllMetrics()[0]
	require.Equal(t, 1, md.ResourceMetrics().Len())
	attrs := md.ResourceMetrics().At(0).Resource().Attributes()
	assert.Equal(t, map[string]any{"service.name": "build"}, attrs.AsRaw())
	assert.Equal(t, int64(5), sumOf(md))
}

// TestUnstampedRequestsAreMergedEveryTime: a sender without the requestid
// processor gets at-least-once, counted.
func TestUnstampedRequestsAreMergedEveryTime(t *testing.T) {
	sink := &consumertest.MetricsSink{}
	g := startGateway(t, t.TempDir(), sink)
	require.NoError(t, g.ConsumeMetrics(context.Background(), deltaJobs("a", 2)))
	require.NoError(t, g.ConsumeMetrics(context.Background(), deltaJobs("a", 2)))
	g.flush(context.Background(), true)
	assert.Equal(t, int64(4), total(sink))
	assert.Equal(t, int64(2), g.counter(t, "requests_unidentified"))
}

func jobsAt(instance string, seq uint64, v int64, ts time.Time) pmetric.Metrics {
	md := stamped(instance, seq, v)
	dp := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints().At(0)
	dp.SetStartTimestamp(pcommon.NewTimestampFromTime(ts.Add(-10 * time.Second)))
	dp.SetTimestamp(pcommon.NewTimestampFromTime(ts))
	return md
}

// TestPointFarFromTheGatewayClockIsRefusedAlone: a worker whose clock runs
// 3 h ahead has its point refused at receipt, counted and logged with its
// resource; the other workers' points of the same series land, stamped
// with the gateway's interval, not any worker's clock.
func TestPointFarFromTheGatewayClockIsRefusedAlone(t *testing.T) {
	sink := &consumertest.MetricsSink{}
	g := startGateway(t, t.TempDir(), sink)
	now := time.Now()
	require.NoError(t, g.ConsumeMetrics(context.Background(), jobsAt("on-time", 1, 5, now)))
	require.NoError(t, g.ConsumeMetrics(context.Background(), jobsAt("ahead-1h", 1, 7, now.Add(time.Hour))))
	require.NoError(t, g.ConsumeMetrics(context.Background(), jobsAt("ahead-3h", 1, 1000, now.Add(3*time.Hour))))
	require.NoError(t, g.ConsumeMetrics(context.Background(), jobsAt("three-weeks-old", 1, 2000, now.Add(-21*24*time.Hour))))
	// One request carrying two workers, one of them skewed.
	both := jobsAt("on-time-2", 1, 11, now)
	jobsAt("ahead-3h-b", 1, 3000, now.Add(3*time.Hour)).ResourceMetrics().MoveAndAppendTo(both.ResourceMetrics())
	both.ResourceMetrics().At(1).Resource().Attributes().PutStr(requestid.InstanceAttribute, "on-time-2")
	require.NoError(t, g.ConsumeMetrics(context.Background(), both))

	before := time.Now()
	g.flush(context.Background(), true)
	require.Len(t, sink.AllMetrics(), 1)
	md := sink.AllMetrics()[0]
	assert.Equal(t, int64(5+7+11), sumOf(md), "the on-time and 1 h ahead workers' points, nothing of the skewed ones")
	dp := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints().At(0)
	assert.WithinDuration(t, before, dp.Timestamp().AsTime(), 5*time.Second, "the merged point carries the gateway's time")
	assert.LessOrEqual(t, dp.StartTimestamp(), dp.Timestamp())
	assert.Equal(t, int64(3), g.counter(t, "points_out_of_range"))

	logged := map[string]bool{}
	for _, e := range g.logs.FilterMessageSnippet("too far from the gateway's clock").All() {
		w, ok := e.ContextMap()["worker"].(map[string]any)
		require.True(t, ok, "the worker's resource is logged: %v", e.ContextMap())
		logged[w["service.instance.id"].(string)] = true
	}
	assert.Equal(t, map[string]bool{"ahead-3h": true, "three-weeks-old": true, "ahead-3h-b": true}, logged)
}

// flaky refuses while refuse is set.
type flaky struct {
	consumertest.MetricsSink
	refuse atomic.Bool
	calls  atomic.Int32
}

func (f *flaky) ConsumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	f.calls.Add(1)
	if f.refuse.Load() {
		return errors.New("queue full")
	}
	return f.MetricsSink.ConsumeMetrics(ctx, md)
}

// TestRefusedIntervalStaysInTheJournal: the exporter refuses the interval
// (its queue is full or cannot write): the interval stays in the journal
// and is offered again, read back from disk, until taken; a restart
// meanwhile hands it on from the journal. Exact either way.
func TestRefusedIntervalStaysInTheJournal(t *testing.T) {
	t.Run("offered again", func(t *testing.T) {
		dir := t.TempDir()
		next := &flaky{}
		next.refuse.Store(true)
		g := startGateway(t, dir, next)
		require.NoError(t, g.ConsumeMetrics(context.Background(), stamped("a", 1, 3)))
		g.flush(context.Background(), true)
		require.NoError(t, g.ConsumeMetrics(context.Background(), stamped("a", 2, 4)))
		assert.Len(t, segments(t, dir), 2, "the refused interval's segment and the open one")
		next.refuse.Store(false)
		require.Eventually(t, func() bool { return total(&next.MetricsSink) == 3 }, 10*time.Second, 20*time.Millisecond, "retried on its own")
		g.flush(context.Background(), true)
		assert.Equal(t, int64(7), total(&next.MetricsSink))
		assert.Len(t, segments(t, dir), 1, "only the new open segment")
	})
	t.Run("restart", func(t *testing.T) {
		dir := t.TempDir()
		next := &flaky{}
		next.refuse.Store(true)
		g := startGateway(t, dir, next)
		require.NoError(t, g.ConsumeMetrics(context.Background(), stamped("a", 1, 3)))
		g.flush(context.Background(), true)
		g.kill()
		sink := &consumertest.MetricsSink{}
		g2 := startGateway(t, dir, sink)
		require.Eventually(t, func() bool { return total(sink) == 3 }, 10*time.Second, 20*time.Millisecond)
		require.NoError(t, g2.ConsumeMetrics(context.Background(), stamped("a", 1, 3)), "the sender's retry")
		g2.flush(context.Background(), true)
		assert.Equal(t, int64(3), total(sink))
	})
}

// TestJournalBoundRefusesRetryably: while the exporter refuses, the journal
// grows up to journal.max_bytes, then requests are refused (retryable, not
// permanent) and stay with their senders.
func TestJournalBoundRefusesRetryably(t *testing.T) {
	next := &flaky{}
	next.refuse.Store(true)
	g := startGateway(t, t.TempDir(), next, func(c *Config) { c.State.Journal.MaxBytes = 4 << 10 })
	var refused error
	sent := int64(0)
	for i := range 1000 {
		if err := g.ConsumeMetrics(context.Background(), stamped("a", uint64(i+1), 1)); err != nil {
			refused = err
			break
		}
		sent++
		if i%10 == 9 {
			g.flush(context.Background(), true)
		}
	}
	require.Error(t, refused)
	assert.Contains(t, refused.Error(), "state.journal.max_bytes")
	assert.False(t, consumererror.IsPermanent(refused), "retryable")
	assert.Less(t, sent, int64(200))
	assert.Equal(t, int64(1), g.counter(t, "requests_refused"))
	next.refuse.Store(false)
	g.flush(context.Background(), true)
	assert.Equal(t, sent, total(&next.MetricsSink), "everything acknowledged is handed on")
}

// blocking holds every hand-over until released.
type blocking struct {
	consumertest.MetricsSink
	release chan struct{}
}

func (b *blocking) ConsumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	<-b.release
	return b.MetricsSink.ConsumeMetrics(ctx, md)
}

// TestMemoryBound: the open interval is handed on early at max_points, and
// while a hand-over is stuck new requests are refused (retryable) once it
// holds twice as many: memory is bounded by configuration, not by senders.
func TestMemoryBound(t *testing.T) {
	next := &blocking{release: make(chan struct{})}
	g := startGateway(t, t.TempDir(), next, func(c *Config) { c.MaxPoints = 10 })
	// Per-worker gauges: each request adds one held point.
	gauge := func(i int) pmetric.Metrics {
		md := pmetric.NewMetrics()
		rm := md.ResourceMetrics().AppendEmpty()
		rm.Resource().Attributes().PutStr("service.instance.id", "w")
		m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
		m.SetName("gpu.utilization")
		dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
		dp.SetDoubleValue(float64(i))
		dp.SetTimestamp(pcommon.NewTimestampFromTime(time.Now()))
		requestid.Stamp(md, requestid.ID{Instance: "w", Sequence: uint64(i + 1)})
		return md
	}
	for i := range 10 {
		require.NoError(t, g.ConsumeMetrics(context.Background(), gauge(i)))
	}
	// At max_points the interval is handed on early (and stuck there).
	require.Eventually(t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.cur.iv.Held() == 0 && len(g.pending) == 1
	}, 5*time.Second, time.Millisecond)
	accepted := 10
	var err error
	for i := 10; i < 100; i++ {
		if err = g.ConsumeMetrics(context.Background(), gauge(i)); err != nil {
			break
		}
		accepted++
	}
	require.Error(t, err, "refused while the hand-over is stuck")
	assert.Contains(t, err.Error(), "max_points")
	assert.False(t, consumererror.IsPermanent(err), "retryable")
	assert.Equal(t, 30, accepted, "max_points being handed on, twice max_points open")
	close(next.release)
	g.flush(context.Background(), true)
	var points int
	for _, md := range next.AllMetrics() {
		points += md.DataPointCount()
	}
	assert.Equal(t, accepted, points)
}

// TestConcurrentSendersMergeOnce: many senders, each sending every request
// twice at once (a retry racing its first copy), merge exactly once.
func TestConcurrentSendersMergeOnce(t *testing.T) {
	sink := &consumertest.MetricsSink{}
	g := startGateway(t, t.TempDir(), sink)
	var wg sync.WaitGroup
	for s := range 8 {
		for copyOf := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 200 {
					assert.NoError(t, g.ConsumeMetrics(context.Background(), stamped(string(rune('a'+s)), uint64(i+1), 1)))
					if copyOf == 0 && i%50 == 0 {
						g.flush(context.Background(), true)
					}
				}
			}()
		}
	}
	wg.Wait()
	g.flush(context.Background(), true)
	assert.Equal(t, int64(8*200), total(sink))
	assert.Equal(t, int64(8*200), g.counter(t, "requests_duplicate"))
}

// TestSegmentSetAsideIsNeverReadBack: a segment a killed gateway had
// renamed aside (its interval was taken) is removed at the next start, not
// handed on again.
func TestSegmentSetAsideIsNeverReadBack(t *testing.T) {
	dir := t.TempDir()
	sink := &consumertest.MetricsSink{}
	g := startGateway(t, dir, sink)
	require.NoError(t, g.ConsumeMetrics(context.Background(), stamped("a", 1, 5)))
	segs := segments(t, dir)
	require.Len(t, segs, 1)
	g.kill()
	// As a kill right after the rename leaves it.
	require.NoError(t, os.Rename(segs[0], segs[0]+statedir.TakenSuffix))
	after := &consumertest.MetricsSink{}
	g2 := startGateway(t, dir, after)
	g2.flush(context.Background(), true)
	assert.Zero(t, total(after))
	_, err := os.Stat(segs[0] + statedir.TakenSuffix)
	assert.ErrorIs(t, err, os.ErrNotExist)
}
