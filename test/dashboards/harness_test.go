// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package dashboards

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/buildsim"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/prometheustest"
	"github.com/gpubuild/otelcol-gpubuild/receiver/nvmlreceiver/fakenvml"
)

// namespace is the shipped default (GPUBUILD_CLOUDWATCH_NAMESPACE): the
// dashboard and the template name it as their default too.
const namespace = "GPUIndexBuild"

// serviceName is the workload's service.name.
const serviceName = "vector-index-build"

// prometheusServer is Debian's prometheus binary on a loopback port with a
// temporary TSDB, evaluating ruleFiles every second.
type prometheusServer struct {
	URL string
}

func startPrometheus(t testing.TB, port int, scrapeTarget string, ruleFiles []string) *prometheusServer {
	t.Helper()
	cfg := "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
	if len(ruleFiles) > 0 {
		cfg += "rule_files:\n"
		for _, f := range ruleFiles {
			cfg += fmt.Sprintf("  - %q\n", f)
		}
	}
	if scrapeTarget != "" {
		cfg += fmt.Sprintf("scrape_configs:\n  - job_name: gpubuild-sidecar\n    static_configs:\n      - targets: [%q]\n", scrapeTarget)
	}
	return &prometheusServer{URL: prometheustest.StartWithConfig(t, port, cfg).URL}
}

// promSample is one series of an instant query's answer.
type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// float is the sample's value; ok is false when it is not a number.
func (s promSample) float() (float64, bool) {
	str, _ := s.Value[1].(string)
	v, err := strconv.ParseFloat(str, 64)
	return v, err == nil
}

// query runs an instant query and returns its vector (a scalar answer is
// returned as one sample without labels).
func (p *prometheusServer) query(promql string) ([]promSample, error) {
	resp, err := http.Get(p.URL + "/api/v1/query?query=" + url.QueryEscape(promql))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("query %s: %s", promql, body.Error)
	}
	switch body.Data.ResultType {
	case "scalar":
		var v [2]any
		if err := json.Unmarshal(body.Data.Result, &v); err != nil {
			return nil, err
		}
		return []promSample{{Value: v}}, nil
	case "vector":
		var out []promSample
		return out, json.Unmarshal(body.Data.Result, &out)
	default:
		return nil, fmt.Errorf("query %s: result type %s, want a vector", promql, body.Data.ResultType)
	}
}

// firingAlerts is alertname -> number of firing alerts.
func (p *prometheusServer) firingAlerts() (map[string]int, error) {
	samples, err := p.query(`ALERTS{alertstate="firing"}`)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, s := range samples {
		out[s.Metric["alertname"]]++
	}
	return out, nil
}

// servicePID is the simulated build service's process.pid: the process
// whose GPU memory is each run's peak.
const servicePID = 424242

// gpuLoad is how long the fake GPUs' scripted load lasts from the driver's
// start: longer than any run of the package, well inside the sampler's
// retention (35 minutes).
const gpuLoad = 10 * time.Minute

// gpus is the fake driver's two GPUs (with GPM, as Hopper has), on the wall
// clock from now (µs) on: each alternates every 3 s between idle (GPU 0:
// 80 W, 10 % busy, SM 5 %, tensor 1 %) and loaded (GPU 0: 320 W, 90 %
// busy, SM 70 %, tensor 40 %; GPU 1 draws and works a little more), and
// the service's process holds 2 GiB, then 6 GiB while loaded, on each.
// Runs therefore get energy, busy time, peak memory, SM and tensor
// activity that differ from run to run.
func gpus(now uint64) []fakenvml.GPU {
	const s = uint64(1_000_000)
	var out []fakenvml.GPU
	for i := range 2 {
		u := uint32(i)
		g := fakenvml.GPU{
			UUID: gpuUUID(i), Name: "NVIDIA H100 80GB HBM3",
			BusID:    fmt.Sprintf("00000000:%02X:00.0", 0x07+i),
			MemTotal: 80 << 30, MemUsed: uint64(20+10*i) << 30, MemReserved: 256 << 20,
			Temperature: 61 + 4*u, PowerMW: 250_500 + 40_000*u, PowerLimitMW: 700_000, EnergyMJ: 5_000_000,
			ClockSM: 1410, ClockMem: 1593, ClockGraphics: 1410, ECCCorrected: 2,
			UtilGPU: 71 + 10*u, UtilMem: 20,
			GPM: fakenvml.GPMOn,
		}
		from := now - 60*s
		g.Power = append(g.Power, fakenvml.PowerStep{FromUs: from, MW: 80_000})
		g.GPMSteps = append(g.GPMSteps, fakenvml.GPMStep{GPUInstance: -1, FromUs: from, Values: [4]float64{5, 5, 1, 5}})
		g.ProcessMemory = append(g.ProcessMemory, fakenvml.ProcessMemoryStep{PID: servicePID, FromUs: from, Bytes: 2 << 30})
		end := now + uint64(gpuLoad/time.Microsecond)
		for at, k := now, uint64(0); at < end; at, k = at+3*s, k+1 {
			loaded := k%2 == 0
			mw, sm, tensor, mem := uint64(80_000), 5.0, 1.0, uint64(2<<30)
			if loaded {
				mw, sm, tensor, mem = 320_000+20_000*uint64(i), 70+5*float64(i), 40+5*float64(i), 6<<30
			}
			g.Power = append(g.Power, fakenvml.PowerStep{FromUs: at, MW: mw})
			g.GPMSteps = append(g.GPMSteps, fakenvml.GPMStep{GPUInstance: -1, FromUs: at, Values: [4]float64{sm, sm, tensor, sm}})
			g.ProcessMemory = append(g.ProcessMemory, fakenvml.ProcessMemoryStep{PID: servicePID, FromUs: at, Bytes: mem})
		}
		// The driver's utilization samples, every 200 ms: a sample at ts
		// is the utilization of the 200 ms before it.
		for ts := now - 5*s; ts < end; ts += s / 5 {
			pct := uint32(10)
			if ts > now && ((ts-now-1)/(3*s))%2 == 0 {
				pct = 90 + 5*u
			}
			g.GPUSamples = append(g.GPUSamples, fakenvml.Sample{TimestampUs: ts, Percent: pct})
		}
		out = append(out, g)
	}
	return out
}

// gpuUUID is the fake GPU i's NVML UUID (hw.id).
func gpuUUID(i int) string { return fmt.Sprintf("GPU-da5b0a7d-0000-4000-8000-00000000000%d", i) }

// fakeDriver builds the fake libnvidia-ml.so.1 and returns the environment
// that makes the collector load it with the given GPUs, on the wall clock.
func fakeDriver(t testing.TB, g []fakenvml.GPU) []string {
	t.Helper()
	dir := t.TempDir()
	libDir := filepath.Join(dir, "lib")
	require.NoError(t, os.Mkdir(libDir, 0o700))
	_, err := fakenvml.Build(libDir, binarytest.RepoRoot())
	require.NoError(t, err)
	sc := fakenvml.Scenario{Driver: "535.161.08", GPUs: g, Realtime: true}
	scenarioPath := filepath.Join(dir, "scenario.txt")
	require.NoError(t, sc.WriteFile(scenarioPath))
	statePath := filepath.Join(dir, "state.txt")
	require.NoError(t, fakenvml.State{}.WriteFile(statePath))
	return []string{"LD_LIBRARY_PATH=" + libDir, fakenvml.EnvScenario + "=" + scenarioPath, fakenvml.EnvState + "=" + statePath}
}

// run is one collector run with its stores.
type run struct {
	cw      *cloudwatchtest.Server
	cwOTLP  *otlpSink         // stands in for CloudWatch's OTLP endpoint
	scrape  *prometheusServer // scrapes the sidecar's endpoint
	remote  *prometheusServer // receives its remote write
	otlpURL string            // the collector's OTLP/HTTP endpoint, host:port
	summary *buildsim.Summary
}

// startRun starts both Prometheus servers (evaluating ruleFiles), the local
// CloudWatch endpoint and the built collector on the shipped
// otelcol-config.yaml with the fake driver, short job timeout and flushes.
func startRun(t testing.TB, ruleFiles []string) *run {
	t.Helper()
	cw, err := cloudwatchtest.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = cw.Close() })
	ports := binarytest.FreePorts(t, 7)
	promTarget := fmt.Sprintf("127.0.0.1:%d", ports[0])
	r := &run{cw: cw, cwOTLP: startOTLPSink(t), otlpURL: fmt.Sprintf("127.0.0.1:%d", ports[4])}
	r.scrape = startPrometheus(t, ports[1], promTarget, ruleFiles)
	r.remote = startPrometheus(t, ports[2], "", ruleFiles)

	env := append(binarytest.EnvWithout("AWS_", "GPUBUILD_", "OTEL_", "FAKE_NVML_", "LD_LIBRARY_PATH"),
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_ACCESS_KEY_ID=AKIDDASHBOARDS000001",
		"AWS_SECRET_ACCESS_KEY=dashboardsSecretNotUsedAnywhere",
		"AWS_CONFIG_FILE=/dev/null",
		"AWS_SHARED_CREDENTIALS_FILE=/dev/null",
		"AWS_REGION=us-east-1",
		"GPUBUILD_DESTINATIONS=cloudwatch,cloudwatch-otlp,prometheus,prometheus-remote-write",
		"GPUBUILD_CLOUDWATCH_OTLP_ENDPOINT="+r.cwOTLP.URL+"/v1/metrics",
		"GPUBUILD_CLOUDWATCH_OUTPUT=cloudwatch",
		"GPUBUILD_CLOUDWATCH_ENDPOINT="+cw.Endpoint(),
		"GPUBUILD_CLOUDWATCH_NAMESPACE="+namespace,
		"GPUBUILD_PROMETHEUS_PORT="+strings.TrimPrefix(promTarget, "127.0.0.1:"),
		"GPUBUILD_PROMETHEUS_REMOTE_WRITE_ENDPOINT="+r.remote.URL+"/api/v1/write",
		"GPUBUILD_QUEUE_DIR="+filepath.Join(t.TempDir(), "queue"),
		fmt.Sprintf("GPUBUILD_HEALTH_PORT=%d", ports[3]),
		fmt.Sprintf("GPUBUILD_OTLP_HTTP_PORT=%d", ports[4]),
		fmt.Sprintf("GPUBUILD_OTLP_GRPC_PORT=%d", ports[5]),
		fmt.Sprintf("GPUBUILD_TELEMETRY_PORT=%d", ports[6]),
		// Short enough for a test: a run whose end never arrives times out
		// after 3 s; derived metrics and GPUs every second.
		"GPUBUILD_JOB_TIMEOUT=3s",
		"GPUBUILD_FLUSH_INTERVAL=1s",
		"GPUBUILD_GPU_COLLECTION_INTERVAL=1s",
		// The pipeline's own health every second, as the flushes.
		"GPUBUILD_PIPELINE_TELEMETRY_INTERVAL=1s",
	)
	env = append(env, fakeDriver(t, gpus(uint64(time.Now().UnixMicro())))...)
	c := binarytest.StartBinary(t, env, "--config", filepath.Join(binarytest.RepoRoot(), "otelcol-config.yaml"))
	require.NoError(t, c.AwaitHealthy(fmt.Sprintf("http://127.0.0.1:%d/", ports[3]), 60*time.Second), "collector not healthy")
	return r
}

// workload is what an on-call engineer's dashboard must show: successes,
// failures, builds that never end (their start arrives, their end does not:
// the collector counts them as timeout), API 4xx and 5xx.
func workload(endpoint string) buildsim.Config {
	cfg := buildsim.DefaultConfig()
	cfg.Protocol = buildsim.ProtocolHTTP
	cfg.Endpoint = endpoint
	cfg.ServiceName = serviceName
	cfg.InstanceID = serviceName + "-0"
	cfg.Seed = 42
	// 20 s of builds: every counter and histogram grows across many
	// scrapes and flushes, so rates see the workload (a counter that
	// appears with its final value has no increase to see).
	cfg.Jobs = 60
	cfg.Rate = 3
	cfg.FailureRatio = 0.2
	// Cancelled runs send their start record and nothing else when job
	// spans are off: they become timeouts.
	cfg.CancelRatio = 0.1
	cfg.JobSpans = false
	cfg.StartLead = 2 * time.Second
	cfg.API4xxRatio = 0.1
	cfg.API5xxRatio = 0.1
	cfg.MetricInterval = 500 * time.Millisecond
	// Runs of a few seconds on the fake GPUs, named by hw.id, from a
	// process whose GPU memory the sampler sees: every run started after
	// the sidecar gets its GPU cost.
	cfg.StageMeans = []buildsim.StageMean{
		{Stage: "download", Mean: 500 * time.Millisecond},
		{Stage: "gpu_build", Mean: 2 * time.Second},
		{Stage: "gpu_to_cpu", Mean: 300 * time.Millisecond},
		{Stage: "upload", Mean: 400 * time.Millisecond},
	}
	cfg.StageMax = 6 * time.Second
	cfg.QueueWaitMean = 200 * time.Millisecond
	cfg.GPUIDs = []string{gpuUUID(0), gpuUUID(1)}
	cfg.ProcessPID = servicePID
	cfg.ExportTimeout = 5 * time.Second
	cfg.RetryMaxElapsed = 30 * time.Second
	return cfg
}

func (r *run) drive(t testing.TB) { r.driveWith(t, workload(r.otlpURL)) }

func (r *run) driveWith(t testing.TB, cfg buildsim.Config) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s, err := buildsim.Run(ctx, cfg, buildsim.WithLogf(t.Logf))
	require.NoError(t, err)
	require.True(t, s.Exports.Complete(), "the collector refused exports: %+v", s.Exports)
	r.summary = s
}
