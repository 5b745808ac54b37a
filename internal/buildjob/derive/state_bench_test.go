// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derive

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpubuild/otelcol-gpubuild/internal/buildjob/derivestate"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// countingStorage is a storage extension whose clients count the value
// bytes they write.
type countingStorage struct {
	extension.Extension
	written *atomic.Int64
}

func (s countingStorage) GetClient(ctx context.Context, kind component.Kind, id component.ID, name string) (storage.Client, error) {
	c, err := s.Extension.(storage.Extension).GetClient(ctx, kind, id, name)
	return countingClient{Client: c, written: s.written}, err
}

type countingClient struct {
	storage.Client
	written *atomic.Int64
}

func (c countingClient) Batch(ctx context.Context, ops ...*storage.Operation) error {
	for _, op := range ops {
		c.written.Add(int64(len(op.Key) + len(op.Value)))
	}
	return c.Client.Batch(ctx, ops...)
}

func (c countingClient) Walk(ctx context.Context, fn storage.WalkFunc) error {
	return c.Client.(storage.Walker).Walk(ctx, fn)
}

// benchState is where a benchmark's connector keeps its state: in memory,
// or in a real file_storage (fsync: the extension's option), with the
// journal in front of it (journal).
type benchState struct{ persisted, fsync, journal bool }

// benchConnector starts a connector on benchConfig, its state as st says.
func benchConnector(b *testing.B, maxActiveJobs int, st benchState, written *atomic.Int64) (*testConnector, func()) {
	ctx := context.Background()
	cfg := benchConfig()
	if maxActiveJobs > 0 {
		cfg.MaxActiveJobs = maxActiveJobs
	}
	host := component.Host(componenttest.NewNopHost())
	var ext extension.Extension
	if st.persisted {
		dir := b.TempDir()
		ext = startFileStorageSync(&testing.T{}, dir, st.fsync)
		cfg.State.Storage = &stateStorageID
		host = storageHost{Host: host, ext: countingStorage{Extension: ext, written: written}}
		if st.journal {
			cfg.State.Journal.Directory = dir
			cfg.State.Journal.Fsync = st.fsync
		}
	}
	set := connectortest.NewNopSettings(testType)
	tc, err := testConnectorFactory().CreateTracesToMetrics(ctx, set, cfg, consumertest.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	if err := tc.Start(ctx, host); err != nil {
		b.Fatal(err)
	}
	return tc.(*tracesConnector).shared, func() {
		_ = tc.Shutdown(ctx)
		if ext != nil {
			_ = ext.Shutdown(ctx)
		}
	}
}

// runConnectorBench feeds batches through ConsumeTraces, flushing every
// len(batches) batches as the flush interval would.
func runConnectorBench(b *testing.B, st benchState, batches []ptrace.Traces, jobsPerBatch int) {
	runConnectorBenchWith(b, 0, st, batches, jobsPerBatch)
}

// defaultMaxActiveJobs is the default of max_active_jobs: as many counted
// runs are remembered, so the persisted run memory holds that many jobs.
var defaultMaxActiveJobs = DefaultJobConfig().MaxActiveJobs

// runConnectorBenchWith is runConnectorBench remembering maxActiveJobs
// runs (0: benchConfig's 1,000).
func runConnectorBenchWith(b *testing.B, maxActiveJobs int, st benchState, batches []ptrace.Traces, jobsPerBatch int) {
	persisted := st.persisted
	var written atomic.Int64
	c, stop := benchConnector(b, maxActiveJobs, st, &written)
	defer stop()
	ctx := context.Background()
	tc := c.Traces()
	spans := batches[0].SpanCount()
	c.emitter.now = func() time.Time { return at(time.Second) }
	b.ReportAllocs()
	before := mallocs()
	written.Store(0)
	wchar0 := processWrittenBytes()
	b.ResetTimer()
	for i := range b.N {
		if err := tc.ConsumeTraces(ctx, batches[i%len(batches)]); err != nil {
			b.Fatal(err)
		}
		if i%len(batches) == len(batches)-1 {
			_ = c.emitter.flush(ctx)
		}
	}
	b.StopTimer()
	reportPerItem(b, "span", spans, mallocs()-before)
	if persisted && jobsPerBatch > 0 {
		b.ReportMetric(float64(written.Load())/(float64(b.N)*float64(jobsPerBatch))*1000, "B-written/1000jobs")
	}
	if persisted {
		b.ReportMetric(float64(written.Load())/float64(b.N), "B-written/batch")
		if wchar0 >= 0 {
			b.ReportMetric(float64(processWrittenBytes()-wchar0)/float64(b.N), "B-syscall-written/batch")
		}
	}
}

// processWrittenBytes is what this process passed to write calls so far
// (wchar in /proc/self/io); -1 where that file does not exist.
func processWrittenBytes() int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "wchar: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return -1
}

// BenchmarkConnectorBuildSpans: whole builds through ConsumeTraces, state
// in memory (the baseline of the persisted variant below).
func BenchmarkConnectorBuildSpans(b *testing.B) {
	runConnectorBench(b, benchState{}, buildMixBatches(64), 0)
}

// BenchmarkConnectorBuildSpansPersisted: the same, each batch's changes
// written to a real file_storage before ConsumeTraces returns.
func BenchmarkConnectorBuildSpansPersisted(b *testing.B) {
	runConnectorBench(b, benchState{persisted: true}, buildMixBatches(64), benchBatch/9)
}

// BenchmarkConnectorBuildSpansJournaled: the same with the journal in
// front of the file_storage: each batch one record appended, the storage
// written once per checkpoint (here mostly by the journal's size: at this
// rate 8 MiB of records come before the 10 s interval).
func BenchmarkConnectorBuildSpansJournaled(b *testing.B) {
	runConnectorBench(b, benchState{persisted: true, journal: true}, buildMixBatches(64), benchBatch/9)
}

// BenchmarkConnectorBuildSpansPersistedHashedIDs: the same with job ids
// that are hashes, as the build service's are, and 512 batches (56,832
// jobs) before the first repeats: the file and its B+tree grow as in a
// long run. B-syscall-written/batch is what the process wrote per batch
// (/proc/self/io wchar): bbolt's pages, not only the values.
func BenchmarkConnectorBuildSpansPersistedHashedIDs(b *testing.B) {
	runConnectorBenchWith(b, defaultMaxActiveJobs, benchState{persisted: true}, buildMixBatchesWithIDs(512, hashedJobID), benchBatch/9)
}

// BenchmarkConnectorBuildSpansJournaledHashedIDs: the same through the
// journal.
func BenchmarkConnectorBuildSpansJournaledHashedIDs(b *testing.B) {
	runConnectorBenchWith(b, defaultMaxActiveJobs, benchState{persisted: true, journal: true}, buildMixBatchesWithIDs(512, hashedJobID), benchBatch/9)
}

// BenchmarkConnectorBuildSpansPersistedFsync: the same with fsync on the
// extension (the power-loss option): one fsync per ConsumeTraces call.
func BenchmarkConnectorBuildSpansPersistedFsync(b *testing.B) {
	runConnectorBench(b, benchState{persisted: true, fsync: true}, buildMixBatches(64), benchBatch/9)
}

// BenchmarkConnectorBuildSpansJournaledFsync: the journal with fsync: one
// fsync of the journal per ConsumeTraces call.
func BenchmarkConnectorBuildSpansJournaledFsync(b *testing.B) {
	runConnectorBench(b, benchState{persisted: true, fsync: true, journal: true}, buildMixBatches(64), benchBatch/9)
}

// BenchmarkConnectorAPISpansPersisted: HTTP server spans only, persisted
// (one or two series change per batch).
func BenchmarkConnectorAPISpansPersisted(b *testing.B) {
	runConnectorBench(b, benchState{persisted: true}, []ptrace.Traces{apiSpanBatch()}, 0)
}

// BenchmarkProcessorHistogramsPersisted: the processor's ProcessMetrics with
// its baselines and counts written to a real file_storage per call.
func BenchmarkProcessorHistogramsPersisted(b *testing.B) {
	const pointsPerBatch = 100
	ctx := context.Background()
	var written atomic.Int64
	ext := startFileStorage(&testing.T{}, b.TempDir())
	defer func() { _ = ext.Shutdown(ctx) }()
	set := componenttest.NewNopTelemetrySettings()
	cfg := derivestate.DefaultConfig()
	cfg.Storage = &stateStorageID
	p := newTestProcessor(set, HTTPSpec{Output: *defaultOutput(), Cumulative: DefaultCumulativeConfig(), Telemetry: testTelemetry(set)}, cfg, consumertest.NewNop())
	var clock time.Time
	p.emitter.now = func() time.Time { return clock }
	clock = t0
	host := storageHost{Host: componenttest.NewNopHost(), ext: countingStorage{Extension: ext, written: &written}}
	if err := p.Start(ctx, host); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = p.Shutdown(ctx) }()
	md, points := processorBatch(pointsPerBatch)
	b.ReportAllocs()
	before := mallocs()
	written.Store(0)
	b.ResetTimer()
	for i := range b.N {
		clock = nextExport(points, i)
		if _, err := p.ProcessMetrics(ctx, md); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportPerItem(b, "point", pointsPerBatch, mallocs()-before)
	b.ReportMetric(float64(written.Load())/float64(b.N), "B-written/batch")
}
