// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derive

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"

	"github.com/gpubuild/otelcol-gpubuild/internal/buildjob/derivestate"
	"github.com/gpubuild/otelcol-gpubuild/internal/buildjob/gpujoin"
	"github.com/gpubuild/otelcol-gpubuild/internal/gpucost"
)

// handSampler is a GPU sampler with hand-made samples: GPU 0 draws 200 W
// at 50 % utilization, GPU 1 100 W at 10 %, sampled every second from
// t0-5 s to t0+300 s; process 4242 holds 2 GiB on GPU 0 from 0 to 60 s and
// 6 GiB from 30 s to 40 s.
type handSampler struct {
	series []gpucost.Series
	// until, when set, hides the samples after it (not taken yet).
	until time.Time
}

func newHandSampler() *handSampler {
	const gib = 1 << 30
	h := &handSampler{}
	for i, g := range []struct {
		uuid  string
		watts float64
		util  float64
	}{{"GPU-00000000-0000-4000-8000-00000000000a", 200, 50}, {"GPU-00000000-0000-4000-8000-00000000000b", 100, 10}} {
		s := gpucost.Series{Index: i, UUID: g.uuid}
		for sec := -5; sec <= 300; sec++ {
			t := at(time.Duration(sec) * time.Second)
			s.Energy = append(s.Energy, gpucost.EnergySample{T: t, MilliJoules: 1e6 + g.watts*1000*float64(sec+5)})
			s.Util = append(s.Util, gpucost.UtilSample{T: t, Percent: g.util})
			var procs []gpucost.ProcMem
			if i == 0 && sec >= 0 && sec <= 60 {
				bytes := uint64(2 * gib)
				if sec >= 30 && sec < 40 {
					bytes = 6 * gib
				}
				procs = append(procs, gpucost.ProcMem{PID: 4242, Bytes: bytes})
			}
			s.Memory = append(s.Memory, gpucost.MemSample{T: t, Procs: procs})
		}
		h.series = append(h.series, s)
	}
	return h
}

func (h *handSampler) Samples(time.Time, time.Time) []gpucost.Series {
	if h.until.IsZero() {
		return h.series
	}
	out := make([]gpucost.Series, len(h.series))
	for i, s := range h.series {
		out[i] = s
		out[i].Energy = slices.DeleteFunc(slices.Clone(s.Energy), func(e gpucost.EnergySample) bool { return e.T.After(h.until) })
		out[i].Util = slices.DeleteFunc(slices.Clone(s.Util), func(u gpucost.UtilSample) bool { return u.T.After(h.until) })
		out[i].Memory = slices.DeleteFunc(slices.Clone(s.Memory), func(m gpucost.MemSample) bool { return m.T.After(h.until) })
	}
	return out
}
func (h *handSampler) MaxGap() time.Duration { return 2 * time.Second }

func gpuService(t *testing.T) *testService {
	return newTestService(t, newOTLPSink(t), attribute.String("service.name", "vector-index-build"),
		attribute.String("service.instance.id", "pod-a"), attribute.Int("process.pid", 4242))
}

func nearly(t *testing.T, want, got float64, msg string) {
	t.Helper()
	assert.LessOrEqual(t, math.Abs(got-want), 1e-6*math.Abs(want), "%s: want %v, got %v", msg, want, got)
}

func TestGPUFiguresPerRun(t *testing.T) {
	svc := gpuService(t)
	d := newConnectorDeriver(testConfig(), t0)
	d.setGPUSampler(newHandSampler())
	sec := func(s int) time.Time { return at(time.Duration(s) * time.Second) }

	// No GPU named: the GPUs where the process held memory (GPU 0).
	svc.status("job-a", running, sec(10))
	svc.status("job-a", completed, sec(40))
	// GPU 1 named on the records: the process holds nothing there.
	svc.status("job-b", running, sec(70), attribute.Int("gpu.index", 1))
	svc.status("job-b", failed, sec(90), attribute.Int("gpu.index", 1))
	d.consumeLogs(svc.logs(), sec(91))
	ps := points(d.flush(sec(95), false))

	e := one(t, ps, metricBuildGPUEnergy, attrs("build.result", "success"))
	assert.Equal(t, "J", e.unit)
	assert.Equal(t, uint64(1), e.count)
	nearly(t, 200*30, e.sum, "200 W for 30 s")
	assert.Equal(t, gpuEnergyBounds, e.bounds)
	b := one(t, ps, metricBuildGPUBusyTime, attrs("build.result", "success"))
	assert.Equal(t, "s", b.unit)
	nearly(t, 0.5*30, b.sum, "50 % of 30 s")
	m := one(t, ps, metricBuildGPUMemoryPeak, attrs("build.result", "success"))
	assert.Equal(t, "By", m.unit)
	assert.Equal(t, float64(6<<30), m.sum)

	nearly(t, 100*20, one(t, ps, metricBuildGPUEnergy, attrs("build.result", "failure")).sum, "GPU 1: 100 W for 20 s")
	nearly(t, 0.1*20, one(t, ps, metricBuildGPUBusyTime, attrs("build.result", "failure")).sum, "GPU 1: 10 % of 20 s")
	assert.Empty(t, matching(ps, metricBuildGPUMemoryPeak, attrs("build.result", "failure")))
	st := d.takeStats()
	assert.Equal(t, int64(1), st.gpuSkipped[gpujoin.FigureMemory][gpujoin.SkipProcessNotOnGPU])
}

// TestGPUOverlapsSplitEvenly: two runs on GPU 0 overlapping for 20 s share
// the overlap's energy and busy time; together they get the GPU's once.
func TestGPUOverlapsSplitEvenly(t *testing.T) {
	svc := gpuService(t)
	d := newConnectorDeriver(testConfig(), t0)
	d.setGPUSampler(newHandSampler())
	sec := func(s int) time.Time { return at(time.Duration(s) * time.Second) }
	g0 := attribute.String("hw.id", "GPU-00000000-0000-4000-8000-00000000000a")
	svc.status("job-c", running, sec(100), g0)
	svc.status("job-d", running, sec(110), g0)
	svc.status("job-c", completed, sec(130), g0)
	d.consumeLogs(svc.logs(), sec(131))
	svc.status("job-d", completed, sec(140), g0)
	d.consumeLogs(svc.logs(), sec(141))
	ps := points(d.flush(sec(145), false))

	e := one(t, ps, metricBuildGPUEnergy, attrs("build.result", "success"))
	assert.Equal(t, uint64(2), e.count)
	// c: 10 s alone (2000 J) + half of 20 s shared (2000 J); d: half of
	// the shared 20 s + 10 s alone: 4000 J each, 8000 J = 200 W * 40 s.
	nearly(t, 8000, e.sum, "the union's energy, once")
	nearly(t, 4000, e.min, "job-c")
	nearly(t, 4000, e.max, "job-d")
	nearly(t, 0.5*40, one(t, ps, metricBuildGPUBusyTime, attrs("build.result", "success")).sum, "busy time of the union")
	assert.Equal(t, int64(2), d.takeStats().gpuOverlappingRuns)
}

// TestGPUNoFigureWithoutCoverage: a run that began before the first sample
// (the sidecar started during it), a timed-out run, and a run naming a GPU
// the sampler does not see get no GPU figure, each counted with its reason.
func TestGPUNoFigureWithoutCoverage(t *testing.T) {
	svc := gpuService(t)
	cfg := testConfig()
	d := newConnectorDeriver(cfg, t0)
	d.setGPUSampler(newHandSampler())
	sec := func(s int) time.Time { return at(time.Duration(s) * time.Second) }
	svc.status("job-e", running, sec(-10))
	svc.status("job-e", completed, sec(20))
	svc.status("job-f", running, sec(20), attribute.String("hw.id", "GPU-not-here"))
	svc.status("job-f", completed, sec(25), attribute.String("hw.id", "GPU-not-here"))
	svc.status("job-g", running, sec(30))
	d.consumeLogs(svc.logs(), sec(31))
	ps := points(d.flush(sec(32).Add(cfg.JobTimeout), false)) // job-g times out

	assert.Equal(t, int64(2), total(ps, metricBuildJobs, attrs("build.result", "success")))
	assert.Equal(t, int64(1), total(ps, metricBuildJobs, attrs("build.result", "timeout")))
	assert.Empty(t, matching(ps, metricBuildGPUEnergy, nil))
	assert.Empty(t, matching(ps, metricBuildGPUBusyTime, nil))
	assert.Empty(t, matching(ps, metricBuildGPUMemoryPeak, nil))
	st := d.takeStats()
	for _, f := range []gpujoin.Figure{gpujoin.FigureEnergy, gpujoin.FigureBusy, gpujoin.FigureMemory} {
		assert.Equal(t, int64(1), st.gpuSkipped[f][gpujoin.SkipReason(gpucost.NotCovered)], f.String())
		assert.Equal(t, int64(1), st.gpuSkipped[f][gpujoin.SkipGPUNotFound], f.String())
		assert.Equal(t, int64(1), st.gpuSkipped[f][gpujoin.SkipNoWindow], f.String())
	}
}

func TestGPUHintFromAttributes(t *testing.T) {
	svc := gpuService(t)
	svc.jobSpan("job-h", at(0), at(time.Second), 0, attribute.String("gpu.index", "3"))
	td := svc.traces()
	h := gpujoin.HintFrom(td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes())
	require.True(t, h.HasIndex)
	assert.Equal(t, int64(3), h.Index)
	assert.True(t, h.Matches(&gpucost.Series{Index: 3}))
	assert.False(t, h.Matches(&gpucost.Series{Index: 0}))
}

// TestGPUSeriesPersist: the GPU families are new family numbers in the
// unchanged series format, so a state written before them reads as before
// (the state tests) and a GPU series comes back whole.
func TestGPUSeriesPersist(t *testing.T) {
	d := newConnectorDeriver(testConfig(), t0)
	s := &series{labels: seriesLabels{fam: familyGPUEnergy, a: "success"}, hist: histogram{bounds: d.series.bounds[familyGPUEnergy]}}
	s.count = 2
	s.hist.observe(4000)
	s.hist.observe(12.5)
	var st derivationState
	rec := st.seriesRecord(s, "res/00000000000000ff")
	layout := stateLayout(d)
	decoded, err := derivestate.DecodeSeries(derivestate.EncodeSeries(nil, &rec), &layout)
	require.NoError(t, err)
	got := d.seriesFromState(decoded, nil)
	assert.Equal(t, familyGPUEnergy, got.labels.fam)
	assert.Equal(t, "success", got.labels.a)
	assert.Equal(t, int64(2), got.count)
	assert.Equal(t, s.hist.counts, got.hist.counts)
	assert.Equal(t, gpuEnergyBounds, got.hist.bounds)
	assert.InDelta(t, 4012.5, got.hist.sum, 0)
}

// TestGPUFiguresPerStage: each stage span gets its own figures over its
// window (not split with other stages: they lie within one run).
func TestGPUFiguresPerStage(t *testing.T) {
	svc := gpuService(t)
	d := newConnectorDeriver(testConfig(), t0)
	d.setGPUSampler(newHandSampler())
	sec := func(s int) time.Time { return at(time.Duration(s) * time.Second) }
	svc.stageSpan("job-s", "download", sec(10), sec(20), 0)
	svc.stageSpan("job-s", "gpu_build", sec(20), sec(40), 0, attribute.String("hw.id", "GPU-00000000-0000-4000-8000-00000000000a"))
	d.consumeTraces(svc.traces(), sec(41))
	ps := points(d.flush(sec(45), false))
	for _, tc := range []struct {
		stage               string
		joules, busy, bytes float64
	}{{"download", 2000, 5, 2 << 30}, {"gpu_build", 4000, 10, 6 << 30}} {
		want := attrs("build.stage", tc.stage, "build.result", "success")
		nearly(t, tc.joules, one(t, ps, metricBuildStageGPUEnergy, want).sum, tc.stage+" energy")
		nearly(t, tc.busy, one(t, ps, metricBuildStageGPUBusyTime, want).sum, tc.stage+" busy")
		assert.Equal(t, tc.bytes, one(t, ps, metricBuildStageGPUMemoryPeak, want).sum, tc.stage+" memory")
	}
	assert.Empty(t, matching(ps, metricBuildGPUEnergy, nil), "no run was counted")
}

// TestGPUFiguresWaitForSamples: a run counted before the samples reach its
// end (the driver's next utilization sample is still to come) gets its
// figures at a later flush, once they do; at the final flush it gives up
// and counts why.
func TestGPUFiguresWaitForSamples(t *testing.T) {
	svc := gpuService(t)
	d := newConnectorDeriver(testConfig(), t0)
	h := newHandSampler()
	d.setGPUSampler(h)
	sec := func(s int) time.Time { return at(time.Duration(s) * time.Second) }
	h.until = sec(30)
	svc.status("job-w", running, sec(10))
	svc.status("job-w", completed, sec(31))
	d.consumeLogs(svc.logs(), sec(31))
	ps := points(d.flush(sec(32), false))
	assert.Equal(t, int64(1), total(ps, metricBuildJobs, attrs("build.result", "success")), "the run is counted at once")
	assert.Empty(t, matching(ps, metricBuildGPUEnergy, nil), "its GPU figures wait")
	assert.Zero(t, d.peekStats().gpuSkipped[gpujoin.FigureEnergy][gpujoin.SkipReason(gpucost.NotCovered)])

	h.until = sec(32)
	ps = points(d.flush(sec(33), false))
	nearly(t, 200*21, one(t, ps, metricBuildGPUEnergy, attrs("build.result", "success")).sum, "200 W for 21 s")
	assert.Equal(t, float64(6<<30), one(t, ps, metricBuildGPUMemoryPeak, attrs("build.result", "success")).sum)

	// The final flush does not wait.
	h.until = sec(40)
	svc.status("job-x", running, sec(35))
	svc.status("job-x", completed, sec(41))
	d.consumeLogs(svc.logs(), sec(41))
	ps = points(d.flush(sec(42), true))
	assert.Empty(t, matching(ps, metricBuildGPUEnergy, nil))
	st := d.takeStats()
	for _, f := range []gpujoin.Figure{gpujoin.FigureEnergy, gpujoin.FigureBusy, gpujoin.FigureMemory} {
		assert.Equal(t, int64(1), st.gpuSkipped[f][gpujoin.SkipReason(gpucost.NotCovered)], f.String())
	}
}

// TestGPUOverlapWithARunWaitingForSamples: a run whose figures wait for
// samples still shares its overlap with a run counted meanwhile.
func TestGPUOverlapWithARunWaitingForSamples(t *testing.T) {
	svc := gpuService(t)
	d := newConnectorDeriver(testConfig(), t0)
	h := newHandSampler()
	d.setGPUSampler(h)
	sec := func(s int) time.Time { return at(time.Duration(s) * time.Second) }
	g0 := attribute.String("hw.id", "GPU-00000000-0000-4000-8000-00000000000a")
	h.until = sec(125)
	svc.status("job-c", running, sec(100), g0)
	svc.status("job-d", running, sec(110), g0)
	svc.status("job-c", completed, sec(130), g0)
	d.consumeLogs(svc.logs(), sec(131)) // job-c waits: samples end at 125 s
	h.until = sec(300)
	svc.status("job-d", completed, sec(140), g0)
	d.consumeLogs(svc.logs(), sec(141)) // job-d is counted at once
	ps := points(d.flush(sec(145), false))
	e := one(t, ps, metricBuildGPUEnergy, attrs("build.result", "success"))
	assert.Equal(t, uint64(2), e.count)
	nearly(t, 8000, e.sum, "200 W for the 40 s of the union, once")
	nearly(t, 4000, e.min, "each run")
	nearly(t, 4000, e.max, "each run")
}

// withGPM gives GPU 0 of a hand sampler GPM activity: SM activity 30 % in
// the periods ending up to 25 s, 70 % up to 35 s, 10 % after; tensor
// activity half of it. Its first sample (-5 s) opens the first period.
// GPU 1 has no GPM.
func withGPM(h *handSampler) *handSampler {
	s := &h.series[0]
	s.GPM = true
	for sec := -5; sec <= 300; sec++ {
		pct := math.NaN()
		switch {
		case sec == -5:
		case sec <= 25:
			pct = 30
		case sec <= 35:
			pct = 70
		default:
			pct = 10
		}
		t := at(time.Duration(sec) * time.Second)
		s.SMActivity = append(s.SMActivity, gpucost.UtilSample{T: t, Percent: pct})
		s.TensorActivity = append(s.TensorActivity, gpucost.UtilSample{T: t, Percent: pct / 2})
	}
	return h
}

// TestGPUActivityPerStageAndRun: each stage run and run gets the
// time-weighted mean of the GPM periods over its window, worked out by
// hand; a stage on the GPU without GPM gets none and is counted as no_gpm.
func TestGPUActivityPerStageAndRun(t *testing.T) {
	svc := gpuService(t)
	d := newConnectorDeriver(testConfig(), t0)
	d.setGPUSampler(withGPM(newHandSampler()))
	sec := func(s float64) time.Time { return at(time.Duration(s * float64(time.Second))) }
	svc.stageSpan("job-s", "download", sec(10), sec(20), 0)
	svc.stageSpan("job-s", "gpu_build", sec(20.5), sec(40), 0, attribute.String("hw.id", "GPU-00000000-0000-4000-8000-00000000000a"))
	svc.stageSpan("job-s", "upload", sec(41), sec(45), 0, attribute.String("hw.id", "GPU-00000000-0000-4000-8000-00000000000b"))
	d.consumeTraces(svc.traces(), sec(46))
	svc.status("job-a", running, sec(10))
	svc.status("job-a", completed, sec(40))
	d.consumeLogs(svc.logs(), sec(46))
	st := d.peekStats()
	ps := points(d.flush(sec(50), false))

	// download [10 s, 20 s]: all at 30 %.
	// gpu_build [20.5 s, 40 s]: 4.5 s at 30 %, 10 s at 70 %, 5 s at 10 %.
	gpuBuild := (4.5*0.30 + 10*0.70 + 5*0.10) / 19.5
	for _, tc := range []struct {
		stage string
		sm    float64
	}{{"download", 0.30}, {"gpu_build", gpuBuild}} {
		want := attrs("build.stage", tc.stage, "build.result", "success")
		sm := one(t, ps, metricBuildStageGPUSMActivity, want)
		assert.Equal(t, "1", sm.unit)
		assert.Equal(t, uint64(1), sm.count)
		nearly(t, tc.sm, sm.sum, tc.stage+" SM activity")
		nearly(t, tc.sm/2, one(t, ps, metricBuildStageGPUTensor, want).sum, tc.stage+" tensor activity")
	}
	assert.Empty(t, matching(ps, metricBuildStageGPUSMActivity, attrs("build.stage", "upload", "build.result", "success")))
	assert.Equal(t, int64(1), st.gpuSkipped[gpujoin.FigureStageSMActivity][gpujoin.SkipNoGPM])
	assert.Equal(t, int64(1), st.gpuSkipped[gpujoin.FigureStageTensorActivity][gpujoin.SkipNoGPM])
	// The upload stage still has its energy (GPU 1 has an energy counter).
	nearly(t, 100*4, one(t, ps, metricBuildStageGPUEnergy, attrs("build.stage", "upload", "build.result", "success")).sum, "upload energy")

	// job-a [10 s, 40 s] on GPU 0 (its process's memory): 15 s at 30 %,
	// 10 s at 70 %, 5 s at 10 %.
	run := one(t, ps, metricBuildGPUSMActivity, attrs("build.result", "success"))
	nearly(t, (15*0.30+10*0.70+5*0.10)/30, run.sum, "run SM activity")
	nearly(t, (15*0.15+10*0.35+5*0.05)/30, one(t, ps, metricBuildGPUTensor, attrs("build.result", "success")).sum, "run tensor activity")
}
