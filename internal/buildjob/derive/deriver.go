// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derive

import (
	"context"
	"hash/maphash"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"

	"github.com/gpubuild/otelcol-gpubuild/internal/buildjob/derivestate"
	"github.com/gpubuild/otelcol-gpubuild/internal/buildjob/gpujoin"
	"github.com/gpubuild/otelcol-gpubuild/internal/cumulative"
)

const (
	evictedActive = iota
	evictedEnded
)

// derivationStats counts what the component's own telemetry reports. The
// emitter drains it after each batch into its totals, which the telemetry
// observes: the hot path only increments ints.
type derivationStats struct {
	skipped      [numSkipReasons]int64
	deduplicated int64
	evicted      [2]int64
	// Persisted state: entries skipped at start, runs forgotten for the
	// byte budget, failed writes.
	stateSkipped [derivestate.NumSkipReasons]int64
	// cumulativeRefused: cumulative points that gave no increment, by
	// reason (baselines are not counted here).
	cumulativeRefused  [cumulative.NumReasons]int64
	stateEvicted       int64
	stateWriteFailures int64
	// GPU cost: figures a counted run did not get, by reason; runs that
	// shared a GPU with another.
	gpuSkipped         [gpujoin.NumAllFigures][gpujoin.NumSkipReasons]int64
	gpuOverlappingRuns int64
}

// add adds o's counts to s's.
func (s *derivationStats) add(o *derivationStats) {
	addAll(s.skipped[:], o.skipped[:])
	s.deduplicated += o.deduplicated
	addAll(s.evicted[:], o.evicted[:])
	addAll(s.stateSkipped[:], o.stateSkipped[:])
	addAll(s.cumulativeRefused[:], o.cumulativeRefused[:])
	s.stateEvicted += o.stateEvicted
	s.stateWriteFailures += o.stateWriteFailures
	for f := range s.gpuSkipped {
		addAll(s.gpuSkipped[f][:], o.gpuSkipped[f][:])
	}
	s.gpuOverlappingRuns += o.gpuOverlappingRuns
}

func addAll(to, from []int64) {
	for i, n := range from {
		to[i] += n
	}
}

// resourcesKeptEpochs is how many flushes a resource entry survives unused.
const resourcesKeptEpochs = 2

// deriver holds everything derived between two flushes: the series, the job
// runs and the lookup tables. It is not safe for concurrent use; the
// connector and the processor serialize calls with a mutex.
type deriver struct {
	scopeName  string // instrumentation scope of the derived metrics
	dimensions []string
	cumulative bool
	resources  *resourceTable
	series     *seriesTable
	stats      derivationStats
	startTime  pcommon.Timestamp // start of cumulative series
	lastFlush  pcommon.Timestamp // start of the next delta points
	prevActive []seriesLabels    // build.jobs.active groups non-zero at the last flush, or reported by a refused one

	// Connector only.
	jobs           *runTracker
	recentSpans    *recentSpans
	jobSpanNames   map[string]bool
	stageSpanNames map[string]string
	jobStatus      map[string]string // status value -> action
	apiFromSpans   bool
	gpu            *gpuCost // nil without a gpu_sampler

	// Processor only: the cumulative-to-delta state of the HTTP server
	// histograms, and what its last calls did (records to save, reasons).
	httpTracker *cumulative.Tracker
	httpResult  cumulative.Result

	// state persists the run memory and the derived counts not yet
	// accepted downstream; nil keeps them in memory only.
	state         *derivationState
	dirtySeries   []*series
	metaDirty     bool
	restoredStart pcommon.Timestamp // start of cumulative series saved by a previous process

	// Scratch space reused for every span, record or data point.
	labels     seriesLabels
	dimScratch []dimValue
}

func newDeriver(out *OutputConfig, jobBounds, stageBounds, apiBounds []float64, start time.Time) *deriver {
	seed := maphash.MakeSeed()
	bounds := [numFamilies][]float64{
		familyJobs:      jobBounds,
		familyStages:    stageBounds,
		familyAPI:       apiBounds,
		familyGPUEnergy: gpuEnergyBounds,
		familyGPUBusy:   gpuBusyBounds,
		familyGPUMemory: gpuMemoryBounds,

		familyStageGPUEnergy: gpuEnergyBounds,
		familyStageGPUBusy:   gpuBusyBounds,
		familyStageGPUMemory: gpuMemoryBounds,

		familyGPUSMActivity:          gpuActivityBounds,
		familyGPUTensorActivity:      gpuActivityBounds,
		familyStageGPUSMActivity:     gpuActivityBounds,
		familyStageGPUTensorActivity: gpuActivityBounds,
	}
	startTS := pcommon.NewTimestampFromTime(start)
	return &deriver{
		dimensions: out.Dimensions,
		cumulative: out.Temporality == TemporalityCumulative,
		resources:  newResourceTable(seed, out.Dimensions),
		series:     newSeriesTable(seed, bounds),
		startTime:  startTS,
		lastFlush:  startTS,
		dimScratch: make([]dimValue, len(out.Dimensions)),
	}
}

// jobSettings is what a connector derivation is built from.
type jobSettings struct {
	OutputConfig
	JobConfig
	State derivestate.Config
}

// newConnectorDeriver derives job, stage and API metrics from spans and logs.
func newConnectorDeriver(cfg *jobSettings, start time.Time) *deriver {
	d := newDeriver(&cfg.OutputConfig, cfg.JobDurationBuckets, cfg.StageDurationBuckets, cfg.APIDurationBuckets, start)
	d.jobs = newRunTracker(cfg, d.countJob)
	d.recentSpans = newRecentSpans(recentSpansPerJob * cfg.MaxActiveJobs)
	d.jobSpanNames = make(map[string]bool, len(cfg.JobSpanNames))
	for _, n := range cfg.JobSpanNames {
		d.jobSpanNames[n] = true
	}
	d.stageSpanNames = make(map[string]string, len(cfg.StageSpanNames))
	for _, r := range cfg.StageSpanNames {
		d.stageSpanNames[r.SpanName] = r.Stage
	}
	d.jobStatus = make(map[string]string, len(cfg.JobStatus))
	for status, action := range cfg.JobStatus {
		d.jobStatus[status] = action
	}
	d.apiFromSpans = cfg.APIRequestsFromSpans
	return d
}

// newProcessorDeriver derives api.requests from HTTP server histograms.
func newProcessorDeriver(cfg *OutputConfig, cum CumulativeConfig, start time.Time, logger *zap.Logger) *deriver {
	// The processor counts requests only: no histograms of its own.
	d := newDeriver(cfg, nil, nil, nil, start)
	d.httpTracker = cumulative.New(cumulative.Config{
		TTL:             cumulativeIdleTTL,
		MaxSeries:       maxCumulativeSeries,
		MaxAge:          cum.MaxAge,
		FutureTolerance: cum.FutureTolerance,
	}, logger)
	return d
}

// setStart sets the time the component started: the start of cumulative
// series and of the first delta points.
func (d *deriver) setStart(t time.Time) {
	ts := pcommon.NewTimestampFromTime(t)
	d.startTime, d.lastFlush = ts, ts
	if d.restoredStart != 0 {
		d.startTime = d.restoredStart // the cumulative totals restored began then
	}
	d.metaDirty = d.state != nil
}

// resolveDims looks every configured dimension up on attrs, then on the
// resource, into the scratch slice.
func (d *deriver) resolveDims(attrs pcommon.Map, res *resourceEntry) []dimValue {
	for i, k := range d.dimensions {
		if v, ok := attrs.Get(k); ok {
			d.dimScratch[i] = dimFrom(v)
		} else {
			d.dimScratch[i] = res.dimValues[i]
		}
	}
	return d.dimScratch
}

// countJob adds one counted run to build.jobs and build.job.duration.
func (d *deriver) countJob(c countedRun) {
	res := d.resources.reintern(c.res)
	d.labels = seriesLabels{res: res, fam: familyJobs, a: c.result, dims: c.dims}
	s := d.series.get(&d.labels)
	s.count++
	if c.hasDuration {
		s.hist.observe(c.seconds)
	}
	d.markDirty(s)
	if d.gpu != nil {
		d.countGPU(&c, res)
	}
}

// countRefused moves the tracker's reasons into the stats.
func (d *deriver) countRefused() {
	for r, n := range d.httpResult.Dropped {
		if cumulative.Reason(r) != cumulative.ReasonBaseline {
			d.stats.cumulativeRefused[r] += int64(n)
		}
		d.httpResult.Dropped[r] = 0
	}
}

// markDirty lists s among the series to persist with the next batch.
func (d *deriver) markDirty(s *series) {
	if d.state != nil && !s.dirty {
		s.dirty = true
		d.dirtySeries = append(d.dirtySeries, s)
	}
}

// clearDirty forgets the changes, once persisted.
func (d *deriver) clearDirty() {
	for i, s := range d.dirtySeries {
		s.dirty = false
		d.dirtySeries[i] = nil
	}
	d.dirtySeries = d.dirtySeries[:0]
	d.metaDirty = false
	if d.jobs != nil {
		d.jobs.ClearDirty()
	}
}

// observe adds one stage run or API request to its family.
func (d *deriver) observe(fam family, res *resourceEntry, a, b, c string, dims []dimValue, seconds float64) {
	d.labels = seriesLabels{res: res, fam: fam, a: a, b: b, c: c, dims: dims}
	s := d.series.get(&d.labels)
	s.count++
	s.hist.observe(seconds)
	d.markDirty(s)
}

// addRequests adds n API requests without a duration (processor).
func (d *deriver) addRequests(res *resourceEntry, route, method, class string, dims []dimValue, n uint64) {
	d.labels = seriesLabels{res: res, fam: familyAPI, a: route, b: method, c: class, dims: dims}
	s := d.series.get(&d.labels)
	s.count += int64(n)
	d.markDirty(s)
}

// flushed is what one flush took from the deriver. It is kept until the
// next consumer has accepted md, so that a refused flush can be carried over
// into the next one.
type flushed struct {
	md pmetric.Metrics
	// start is the start of md's delta points.
	start pcommon.Timestamp
	// taken holds the delta series md was built from; they are no longer in
	// the table. Nil in cumulative mode, where the table keeps the totals.
	taken []*series
	// active holds the build.jobs.active groups md reports.
	active *seriesTable
	// series is how many series md reports (counted and gauge series).
	series int
	// points is md's data point count, taken before md is offered: the next
	// consumer owns it then and may change it (drop points, convert them).
	points int
}

// takeFlush sweeps the job runs and returns the derived metrics; md is
// empty when nothing was derived. final counts pending runs at once
// (shutdown). In delta mode the series are taken out of the table: pass the
// result to carryOver if the next consumer refuses it.
func (d *deriver) takeFlush(now time.Time, final bool) *flushed {
	if d.jobs != nil {
		// With the state persisted, an end still waiting for its start
		// stays pending across a restart instead of being counted without
		// its start at shutdown.
		d.jobs.Sweep(now, final && d.state == nil)
	}
	if d.gpu != nil {
		// GPU figures that waited for samples reaching their window's end.
		d.retryGPU(final)
	}
	if d.state != nil {
		// What the sweep counted is written before it is handed over.
		_ = d.state.persist(context.Background(), d)
	}
	nowTS := pcommon.NewTimestampFromTime(now)
	f := &flushed{start: d.lastFlush}
	if d.cumulative {
		f.start = d.startTime
	}

	f.active = d.activeGauge()
	out := newMetricsBuilder(d.scopeName, d.dimensions, d.cumulative, f.start, nowTS)
	for _, s := range d.series.list {
		if out.add(s) {
			f.series++
		}
	}
	for _, g := range f.active.list {
		out.addActive(g)
	}
	f.series += len(f.active.list)
	f.md = out.build()
	f.points = f.md.DataPointCount()

	if !d.cumulative {
		f.taken = d.series.take()
	} else {
		for _, s := range d.series.list {
			s.labels.res = d.resources.reintern(s.labels.res)
		}
	}
	d.lastFlush = nowTS
	d.resources.forgetUnused(resourcesKeptEpochs)
	return f
}

// carryOver puts back what a refused flush took, so that the next flush
// reports it: the delta counts and histograms are added to what was derived
// since (the next points start where the refused ones did); cumulative
// series still hold their totals. The build.jobs.active groups it reported
// are reported again, so a 0 that was refused is not lost either.
// Flushes must not overlap: f must be the latest flush.
func (d *deriver) carryOver(f *flushed) {
	if !d.cumulative {
		for _, s := range f.taken {
			s.labels.res = d.resources.reintern(s.labels.res)
			if d.state != nil {
				d.state.mergeSeries(d, s)
			} else {
				d.series.merge(s)
			}
		}
		d.lastFlush = f.start
	}
	d.prevActive = d.prevActive[:0]
	for _, g := range f.active.list {
		d.prevActive = append(d.prevActive, g.labels)
	}
}

// activeGauge counts the active runs per resource and dimensions. A group
// that had active runs at the previous flush and has none now reports 0
// once, so the last value seen downstream is not a stale non-zero.
func (d *deriver) activeGauge() *seriesTable {
	gauges := newSeriesTable(maphash.MakeSeed(), [numFamilies][]float64{})
	if d.jobs == nil {
		return gauges
	}
	for i := range d.prevActive {
		d.prevActive[i].res = d.resources.reintern(d.prevActive[i].res)
		gauges.get(&d.prevActive[i])
	}
	d.jobs.ForEachActive(func(p runPayload) {
		l := seriesLabels{res: d.resources.reintern(p.res), fam: familyJobs, dims: p.dims}
		gauges.get(&l).count++
	})
	d.prevActive = d.prevActive[:0]
	for _, g := range gauges.list {
		if g.count > 0 {
			d.prevActive = append(d.prevActive, g.labels)
		}
	}
	return gauges
}
