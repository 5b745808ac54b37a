// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package nvml

import (
	"context"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/promtext"
	"github.com/gpubuild/otelcol-gpubuild/receiver/nvmlreceiver/fakenvml"
)

const (
	servicePID = 777777
	gib        = uint64(1) << 30
)

// costScenario is two GPUs on the wall clock, from t (µs) on: GPU 0 draws
// 100 W, 300 W from t+2 s, 150 W from t+6 s; its driver samples
// utilization every 100 ms: 20 %, 90 % from t+2 s, 40 % from t+6 s; the
// service's process holds 1 GiB, 3 GiB from t+2 s, 6 GiB from t+5.5 s,
// 2 GiB from t+7 s; its GPM SM activity is 30 %, 80 % from t+2 s, 50 %
// from t+6 s, its tensor activity 10 %, 40 %, 20 %. GPU 1 draws 50 W,
// holds no process of the service and has no GPM.
func costScenario(t uint64) fakenvml.Scenario {
	const s = uint64(1_000_000)
	g0 := fakenvml.GPU{
		UUID: "GPU-c0570000-0000-4000-8000-0000000000e0", Name: "NVIDIA H100 80GB HBM3", BusID: "00000000:18:00.0",
		MemTotal: 80 << 30, PowerLimitMW: 700_000, EnergyMJ: 9_000_000, Temperature: 40, UtilGPU: 1,
		Power: []fakenvml.PowerStep{{FromUs: t - 60*s, MW: 100_000}, {FromUs: t + 2*s, MW: 300_000}, {FromUs: t + 6*s, MW: 150_000}},
		ProcessMemory: []fakenvml.ProcessMemoryStep{
			{PID: servicePID, FromUs: t - 60*s, Bytes: gib}, {PID: servicePID, FromUs: t + 2*s, Bytes: 3 * gib},
			{PID: servicePID, FromUs: t + 5*s + s/2, Bytes: 6 * gib}, {PID: servicePID, FromUs: t + 7*s, Bytes: 2 * gib},
		},
	}
	g0.GPM = fakenvml.GPMOn
	g0.GPMSteps = []fakenvml.GPMStep{
		{GPUInstance: -1, FromUs: t - 60*s, Values: [4]float64{30, 25, 10, 15}},
		{GPUInstance: -1, FromUs: t + 2*s, Values: [4]float64{80, 60, 40, 55}},
		{GPUInstance: -1, FromUs: t + 6*s, Values: [4]float64{50, 35, 20, 30}},
	}
	// A sample at ts is the utilization of (ts-100 ms, ts].
	for ts := t - 5*s; ts <= t+55*s; ts += s / 10 {
		p := uint32(20)
		switch {
		case ts > t+6*s:
			p = 40
		case ts > t+2*s:
			p = 90
		}
		g0.GPUSamples = append(g0.GPUSamples, fakenvml.Sample{TimestampUs: ts, Percent: p})
	}
	g1 := fakenvml.GPU{
		UUID: "GPU-c0570000-0000-4000-8000-0000000000e1", Name: "NVIDIA H100 80GB HBM3", BusID: "00000000:19:00.0",
		MemTotal: 80 << 30, PowerLimitMW: 700_000, EnergyMJ: 1_000, Temperature: 40, UtilGPU: 5, SamplesUnsupported: true,
		Power: []fakenvml.PowerStep{{FromUs: t - 60*s, MW: 50_000}},
	}
	return fakenvml.Scenario{Driver: "550.54.15", Realtime: true, GPUs: []fakenvml.GPU{g0, g1}}
}

// TestGPUCostPerRun runs the built distribution on its shipped
// configuration with the fake NVML on the wall clock, and a service (the
// OTel SDK, process.pid on its resource) whose job status records place
// two overlapping runs on GPU 0: job-1 from t+1 s to t+5 s (success),
// job-2 from t+4 s to t+8 s (failure). Worked out by hand from the
// scenario, with the overlap t+4..t+5 s split evenly:
//
//	job-1: energy 100 W*1 s + 300 W*2 s + 300 W*1 s/2 = 850 J;
//	       busy 0.2*1 + 0.9*2 + 0.9*1/2 = 2.45 s; peak 3 GiB
//	job-2: energy 300 W*1 s/2 + 300 W*1 s + 150 W*2 s = 750 J;
//	       busy 0.9/2 + 0.9*1 + 0.4*2 = 2.15 s; peak 6 GiB
//
// and the mean GPM activity of each window (a mean: not split):
//
//	job-1: SM (0.3*1 + 0.8*3)/4 = 0.675; tensor (0.1*1 + 0.4*3)/4 = 0.325
//	job-2: SM (0.8*2 + 0.5*2)/4 = 0.65;  tensor (0.4*2 + 0.2*2)/4 = 0.3
//
// and job-2's gpu_build stage span (naming GPU 0 by hw.id) its own.
//
// Energy is compared at 1e-4 and 8 J: the sampler keeps a counter read
// only when its NVML call took at most 25 ms, so a read's time is known to
// 12.5 ms (4 J at 300 W at each end of a window); the counter is whole mJ.
// A run given another run's window or share is off by 150 J or more. Busy
// time comes from the driver's own sample timestamps: 1e-6. Memory: exact.
// GPM activity: its samples are stamped on the host clock around their
// call, which a loaded machine can stretch; 0.02 absolute (a window off by
// one second is off by 0.075 here).
//
// A sampler descheduled for over 2 s on a busy machine voids the windows
// it spans, and the sidecar says so (otelcol_buildjob_gpu_figures_skipped
// with reason sample_gap) instead of guessing: the scenario is then played
// again, with a fresh sidecar, up to three times.
func TestGPUCostPerRun(t *testing.T) {
	root := binarytest.RepoRoot()
	libDir := filepath.Join(t.TempDir(), "lib")
	require.NoError(t, os.Mkdir(libDir, 0o700))
	_, err := fakenvml.Build(libDir, root)
	require.NoError(t, err)

	type want struct {
		metric, result string
		value, rel     float64
		abs            float64
	}
	wants := []want{
		{"build.gpu.energy", "success", 850, 1e-4, 8},
		{"build.gpu.energy", "failure", 750, 1e-4, 8},
		{"build.gpu.busy_time", "success", 2.45, 1e-6, 0},
		{"build.gpu.busy_time", "failure", 2.15, 1e-6, 0},
		{"build.gpu.memory.peak", "success", float64(3 * gib), 0, 0},
		{"build.gpu.memory.peak", "failure", float64(6 * gib), 0, 0},
		{"build.stage.gpu.energy", "failure", 675, 1e-4, 8},
		{"build.stage.gpu.busy_time", "failure", 1.95, 1e-6, 0},
		{"build.stage.gpu.memory.peak", "failure", float64(6 * gib), 0, 0},
		{"build.gpu.sm_activity", "success", 0.675, 0, 0.02},
		{"build.gpu.sm_activity", "failure", 0.65, 0, 0.02},
		{"build.gpu.tensor_activity", "success", 0.325, 0, 0.02},
		{"build.gpu.tensor_activity", "failure", 0.3, 0, 0.02},
		{"build.stage.gpu.sm_activity", "failure", 0.65, 0, 0.02},
	}
	var play costPlay
	for attempt := 1; attempt <= 3; attempt++ {
		play = playCostScenario(t, root, libDir, func(p costPlay) bool {
			for _, w := range wants {
				if len(p.values(w.metric, w.result)) == 0 {
					return false
				}
			}
			return true
		})
		if play.sampleGaps == 0 {
			break
		}
		t.Logf("attempt %d: the sampler stalled during the runs; %v figures skipped with sample_gap, as documented; playing the scenario again",
			attempt, play.sampleGaps)
	}
	require.Zero(t, play.sampleGaps, "every attempt lost figures to sample_gap")
	for _, w := range wants {
		got := play.values(w.metric, w.result)
		if len(got) == 0 {
			for _, d := range play.datums {
				t.Logf("datum %s %v %v", d.MetricName, d.Dimensions, d.Values)
			}
			t.Logf("telemetry:\n%s", play.telemetry)
		}
		require.Len(t, got, 1, "%s %s: one run within 30 s", w.metric, w.result)
		assert.LessOrEqual(t, math.Abs(got[0]-w.value), w.rel*w.value+w.abs, "%s %s: want %v, got %v", w.metric, w.result, w.value, got[0])
	}
}

// costPlay is what one play of the cost scenario left: the datums that
// landed, the figures the sidecar skipped for sample_gap, its telemetry.
type costPlay struct {
	datums     []cloudwatchtest.Datum
	sampleGaps float64
	telemetry  string
}

// values are the run values of metric's datums for build.result result
// (the gpu_build stage's, for a stage metric).
func (p costPlay) values(metric, result string) []float64 {
	var out []float64
	for _, d := range p.datums {
		if d.MetricName == metric && d.Dimensions["build.result"] == result &&
			(!strings.HasPrefix(metric, "build.stage.") || d.Dimensions["build.stage"] == "gpu_build") {
			out = append(out, runValues(d)...)
		}
	}
	return out
}

// playCostScenario starts the built distribution on its shipped
// configuration with the fake NVML playing costScenario on the wall clock,
// sends the service's records once every window has passed, and waits up
// to 30 s for complete (or for a figure skipped with sample_gap).
func playCostScenario(t *testing.T, root, libDir string, complete func(costPlay) bool) costPlay {
	dir := t.TempDir()
	// t: a whole second, far enough ahead for the sidecar to be sampling.
	base := time.Now().Add(12 * time.Second).Truncate(time.Second)
	scenarioPath := filepath.Join(dir, "scenario.txt")
	require.NoError(t, costScenario(uint64(base.UnixMicro())).WriteFile(scenarioPath))

	cw, err := cloudwatchtest.Start("127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = cw.Close() }()
	httpPort := binarytest.FreePort(t)
	telPort := binarytest.FreePort(t)
	env := sidecarEnv(t, cw, dir,
		"LD_LIBRARY_PATH="+libDir,
		fakenvml.EnvScenario+"="+scenarioPath,
		"GPUBUILD_GPU_SAMPLING_INTERVAL=250ms",
		"GPUBUILD_FLUSH_INTERVAL=1s",
		"GPUBUILD_OTLP_HTTP_PORT="+strconv.Itoa(httpPort),
		"GPUBUILD_TELEMETRY_PORT="+strconv.Itoa(telPort),
	)
	col := binarytest.StartBinary(t, env, "--config", filepath.Join(root, "otelcol-config.yaml"))
	defer func() { _, _ = col.Stop(30 * time.Second) }()
	require.True(t, binarytest.Eventually(20*time.Second, func() bool {
		return col.Exited() || containsAll(col.Output.String(), "sampling GPUs", "Everything is ready")
	}), "the sidecar did not start sampling:\n%s", col.Output.String())
	require.False(t, col.Exited(), "collector exited: %v\n%s", col.Err(), col.Output.String())
	require.True(t, time.Now().Before(base.Add(time.Second)), "the sidecar took too long to start for this scenario")

	// The records go once every window has passed.
	time.Sleep(time.Until(base.Add(8*time.Second + 500*time.Millisecond)))
	svc := startBuildService(t, httpPort, resource.NewSchemaless(attribute.String("service.name", "vector-index-build"),
		attribute.String("service.instance.id", "pod-gpu"), attribute.Int("process.pid", servicePID)))
	status := func(id, st string, at time.Duration) { svc.status(id, st, base.Add(at)) }
	// job-2's start is known when job-1 is counted: they share t+4..t+5 s.
	status("job-1", "RUNNING_INDEX_BUILD", time.Second)
	status("job-2", "RUNNING_INDEX_BUILD", 4*time.Second)
	status("job-1", "COMPLETED_INDEX_BUILD", 5*time.Second)
	status("job-2", "FAILED_INDEX_BUILD", 8*time.Second)
	// job-2's gpu_build stage, naming GPU 0 by UUID: t+4.5..t+7.5 s, not
	// split with anything: 300 W*1.5 s + 150 W*1.5 s = 675 J; busy
	// 0.9*1.5 + 0.4*1.5 = 1.95 s; peak 6 GiB (from t+5.5 s); SM activity
	// (0.8*1.5 + 0.5*1.5)/3 = 0.65.
	_, stage := svc.tracer.Start(context.Background(), "gpu_build", trace.WithTimestamp(base.Add(4500*time.Millisecond)),
		trace.WithAttributes(attribute.String("build.job.id", "job-2"), attribute.String("build.stage", "gpu_build"),
			attribute.String("build.stage.result", "failure"), attribute.String("hw.id", "GPU-c0570000-0000-4000-8000-0000000000e0")))
	stage.End(trace.WithTimestamp(base.Add(7500 * time.Millisecond)))

	var play costPlay
	binarytest.Eventually(30*time.Second, func() bool {
		play = costPlay{datums: cw.Datums()}
		if fams, err := promtext.Scrape("127.0.0.1:" + strconv.Itoa(telPort)); err == nil {
			play.sampleGaps, _ = fams.Sum("otelcol_buildjob_gpu_figures_skipped", map[string]string{"reason": "sample_gap"})
		}
		return col.Exited() || play.sampleGaps > 0 || complete(play)
	})
	require.False(t, col.Exited(), "collector exited: %v", col.Err())
	if r, err := http.Get("http://127.0.0.1:" + strconv.Itoa(telPort) + "/metrics"); err == nil {
		b, _ := io.ReadAll(r.Body)
		_ = r.Body.Close()
		play.telemetry = string(b)
	}
	return play
}

// runValues are the values of single runs a datum carries: its values, its
// value, or the sum of statistics over one run.
func runValues(d cloudwatchtest.Datum) []float64 {
	out := append([]float64(nil), d.Values...)
	if d.Value != nil {
		out = append(out, *d.Value)
	}
	if d.Statistics != nil && d.Statistics.SampleCount == 1 {
		out = append(out, d.Statistics.Sum)
	}
	return out
}

// buildService is a build service's OTel Go SDK sending its job status
// records and spans to the sidecar's OTLP/HTTP port, each as it is emitted.
type buildService struct {
	logger otellog.Logger
	tracer trace.Tracer
}

func startBuildService(t *testing.T, httpPort int, res *resource.Resource) buildService {
	ctx := context.Background()
	url := "http://127.0.0.1:" + strconv.Itoa(httpPort)
	exp, err := otlploghttp.New(ctx, otlploghttp.WithEndpointURL(url+"/v1/logs"))
	require.NoError(t, err)
	lp := sdklog.NewLoggerProvider(sdklog.WithProcessor(sdklog.NewSimpleProcessor(exp)), sdklog.WithResource(res))
	texp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(url+"/v1/traces"))
	require.NoError(t, err)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(texp), sdktrace.WithResource(res))
	t.Cleanup(func() { _ = lp.Shutdown(ctx); _ = tp.Shutdown(ctx) })
	return buildService{lp.Logger("build-service"), tp.Tracer("build-service")}
}

// status emits the job status record st of job id at at, with attrs.
func (s buildService) status(id, st string, at time.Time, attrs ...attribute.KeyValue) {
	var rec otellog.Record
	rec.SetTimestamp(at)
	rec.SetBody(attribute.StringValue("job " + id + " is " + st))
	rec.AddAttributes(attribute.String("build.job.id", id), attribute.String("build.job.status", st))
	rec.AddAttributes(attrs...)
	s.logger.Emit(context.Background(), rec)
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
