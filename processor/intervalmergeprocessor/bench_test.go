// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package intervalmergeprocessor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/gpubuild/otelcol-gpubuild/internal/requestid"
	"github.com/gpubuild/otelcol-gpubuild/processor/intervalmergeprocessor/internal/merge"
	"github.com/gpubuild/otelcol-gpubuild/processor/intervalmergeprocessor/internal/metadata"
	"github.com/gpubuild/otelcol-gpubuild/processor/intervalmergeprocessor/internal/receipts"
	"github.com/gpubuild/otelcol-gpubuild/processor/intervalmergeprocessor/internal/statedir"
)

// workerRequest is one worker's flush of derived build metrics: seriesPerWorker
// delta counters and as many delta histograms (14 buckets), attribute sets
// shared by every worker (engine, data type, stage, result, route...).
func workerRequest(worker, seriesPerWorker int) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "vector-index-build")
	rm.Resource().Attributes().PutStr("service.instance.id", fmt.Sprintf("worker-%04d", worker))
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	c := ms.AppendEmpty()
	c.SetName("build.stage.runs")
	s := c.SetEmptySum()
	s.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	s.SetIsMonotonic(true)
	h := ms.AppendEmpty()
	h.SetName("build.stage.duration")
	h.SetUnit("s")
	hg := h.SetEmptyHistogram()
	hg.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	bounds := []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}
	for i := range seriesPerWorker {
		dp := s.DataPoints().AppendEmpty()
		dp.Attributes().PutStr("build.stage", fmt.Sprintf("stage-%d", i%8))
		dp.Attributes().PutStr("build.engine", fmt.Sprintf("engine-%d", i/8))
		dp.Attributes().PutStr("build.result", "success")
		dp.SetIntValue(int64(worker%7 + 1))
		hp := hg.DataPoints().AppendEmpty()
		dp.Attributes().CopyTo(hp.Attributes())
		hp.ExplicitBounds().FromRaw(bounds)
		counts := make([]uint64, len(bounds)+1)
		counts[i%len(counts)] = 2
		hp.BucketCounts().FromRaw(counts)
		hp.SetCount(2)
		hp.SetSum(1.5)
		hp.SetMin(0.5)
		hp.SetMax(1)
	}
	return md
}

// BenchmarkMergeInterval: one interval of 1,000 workers, 32 series each
// (16 counters, 16 histograms): points merged per second on one core, and
// the heap the open interval holds.
func BenchmarkMergeInterval(b *testing.B) {
	const workers, series = 1000, 16
	reqs := make([]pmetric.Metrics, workers)
	for i := range reqs {
		reqs[i] = workerRequest(i, series)
	}
	points := workers * series * 2
	b.ReportAllocs()
	b.ResetTimer()
	var iv *merge.Interval
	for range b.N {
		iv = merge.New(merge.Options{DropResourceAttributes: []string{"service.instance.id"}})
		for _, r := range reqs {
			iv.Add(r)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(points)*float64(b.N)/b.Elapsed().Seconds(), "points/s")
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	b.ReportMetric(float64(m.HeapAlloc)/(1<<20), "heapMiB")
	if iv.Stats().PointsMerged != int64(points-2*series) {
		b.Fatalf("merged %d points, want %d", iv.Stats().PointsMerged, points-2*series)
	}
}

// BenchmarkConsumeAndFlush: the processor end to end (1,000 workers'
// requests held, merged, handed on), next consumer a sink.
func BenchmarkConsumeAndFlush(b *testing.B) {
	const workers, series = 1000, 16
	reqs := make([]pmetric.Metrics, workers)
	for i := range reqs {
		reqs[i] = workerRequest(i, series)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		cfg := createDefaultConfig()
		cfg.Interval = time.Hour
		p, err := newMergeProcessor(processortest.NewNopSettings(metadata.Type), cfg, consumertest.NewNop())
		if err != nil {
			b.Fatal(err)
		}
		done := make(chan error, workers)
		for _, r := range reqs {
			go func() { done <- p.ConsumeMetrics(context.Background(), r) }()
		}
		for {
			p.mu.Lock()
			n := p.cur.iv.Stats().PointsIn
			p.mu.Unlock()
			if n == int64(workers*series*2) {
				break
			}
			runtime.Gosched()
		}
		p.flush(context.Background(), true)
		for range workers {
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(workers*series*2)*float64(b.N)/b.Elapsed().Seconds(), "points/s")
}

// BenchmarkConsumeJournaled: the processor with its receipt journal: 1,000
// sidecars' stamped requests written, merged and acknowledged one by one,
// then the interval handed on and committed; next consumer a sink.
func BenchmarkConsumeJournaled(b *testing.B) {
	const workers, series = 1000, 16
	reqs := make([]pmetric.Metrics, workers)
	for i := range reqs {
		reqs[i] = workerRequest(i, series)
	}
	cfg := createDefaultConfig()
	cfg.Interval = time.Hour
	cfg.State.Journal.Directory = b.TempDir()
	p, err := newMergeProcessor(processortest.NewNopSettings(metadata.Type), cfg, consumertest.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	if err := p.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = p.Shutdown(context.Background()) }()
	b.ReportAllocs()
	b.ResetTimer()
	for n := range b.N {
		for i, r := range reqs {
			md := pmetric.NewMetrics()
			r.CopyTo(md)
			requestid.Stamp(md, requestid.ID{Instance: fmt.Sprintf("sidecar-%04d", i), Sequence: uint64(n + 1)})
			if err := p.ConsumeMetrics(context.Background(), md); err != nil {
				b.Fatal(err)
			}
		}
		p.flush(context.Background(), true)
	}
	b.ReportMetric(float64(workers)*float64(b.N)/b.Elapsed().Seconds(), "requests/s")
	b.ReportMetric(float64(workers*series*2)*float64(b.N)/b.Elapsed().Seconds(), "points/s")
}

// BenchmarkCommitWindow: what follows the next consumer taking an
// interval: the segment renamed aside (the residual window: a gateway
// killed before the rename sends the interval again at its next start),
// then the identities of 1,000 sidecars saved and the segment removed.
// µs-window is the rename, µs-commit the whole.
func BenchmarkCommitWindow(b *testing.B) {
	cfg := createDefaultConfig()
	cfg.State.Journal.Directory = b.TempDir()
	p, err := newMergeProcessor(processortest.NewNopSettings(metadata.Type), cfg, consumertest.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	if err := p.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = p.Shutdown(context.Background()) }()
	now := time.Now()
	for i := range 1000 {
		for q := range 6 {
			p.ids.Add(requestid.ID{Instance: fmt.Sprintf("%032x", i), Sequence: uint64(q + 1)}, now)
		}
	}
	seg := filepath.Join(cfg.State.Journal.Directory, "segment")
	body := make([]byte, 6<<20) // an interval of 1,000 sidecars' requests
	var window time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		if err := os.WriteFile(seg, body, 0o600); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t0 := time.Now()
		if err := os.Rename(seg, seg+statedir.TakenSuffix); err != nil {
			b.Fatal(err)
		}
		window += time.Since(t0)
		if err := os.Rename(seg+statedir.TakenSuffix, seg); err != nil {
			b.Fatal(err)
		}
		p.commit(&interval{seg: receipts.Segment{Path: seg}})
	}
	b.ReportMetric(float64(window.Microseconds())/float64(b.N), "µs-window")
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs-commit")
}
