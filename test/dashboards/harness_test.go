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

// gpus is the fake driver's two GPUs.
func gpus() []fakenvml.GPU {
	var out []fakenvml.GPU
	for i := range 2 {
		u := uint32(i)
		out = append(out, fakenvml.GPU{
			UUID: fmt.Sprintf("GPU-da5b0a7d-0000-4000-8000-00000000000%d", i), Name: "NVIDIA A100-SXM4-80GB",
			BusID:    fmt.Sprintf("00000000:%02X:00.0", 0x07+i),
			MemTotal: 80 << 30, MemUsed: uint64(20+10*i) << 30, MemReserved: 256 << 20,
			Temperature: 61 + 4*u, PowerMW: 250_500 + 40_000*u, PowerLimitMW: 400_000, EnergyMJ: 5_000_000,
			ClockSM: 1410, ClockMem: 1593, ClockGraphics: 1410, ECCCorrected: 2,
			UtilGPU: 71 + 10*u, UtilMem: 20,
		})
	}
	return out
}

// fakeDriver builds the fake libnvidia-ml.so.1 and returns the environment
// that makes the collector load it with the given GPUs.
func fakeDriver(t testing.TB, g []fakenvml.GPU) []string {
	t.Helper()
	dir := t.TempDir()
	libDir := filepath.Join(dir, "lib")
	require.NoError(t, os.Mkdir(libDir, 0o700))
	_, err := fakenvml.Build(libDir, binarytest.RepoRoot())
	require.NoError(t, err)
	sc := fakenvml.Scenario{Driver: "535.161.08", GPUs: g}
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
	)
	env = append(env, fakeDriver(t, gpus())...)
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
