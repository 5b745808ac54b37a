// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package distro

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.yaml.in/yaml/v3"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
)

func TestComponentsListed(t *testing.T) {
	out, err := runBinary(t, cleanEnv(t), "components")
	require.NoError(t, err, out)

	var listed struct {
		Receivers  []struct{ Name string } `yaml:"receivers"`
		Processors []struct{ Name string } `yaml:"processors"`
		Connectors []struct{ Name string } `yaml:"connectors"`
		Exporters  []struct{ Name string } `yaml:"exporters"`
		Extensions []struct{ Name string } `yaml:"extensions"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(out), &listed), out)
	names := func(list []struct{ Name string }) []string {
		var n []string
		for _, c := range list {
			n = append(n, c.Name)
		}
		return n
	}
	assert.Subset(t, names(listed.Receivers), []string{"otlp", "nvml"})
	assert.Subset(t, names(listed.Processors), []string{"buildjob", "memory_limiter", "batch"})
	assert.Subset(t, names(listed.Connectors), []string{"buildjob"})
	assert.Subset(t, names(listed.Exporters), []string{"cloudwatch", "debug", "nop", "prometheus"})
	assert.Subset(t, names(listed.Extensions), []string{"health_check", "file_storage", "bearertokenauth", "basicauth"})
}

func TestValidateDefaultConfig(t *testing.T) {
	out, err := runBinary(t, cleanEnv(t), "validate", "--config", filepath.Join(binarytest.RepoRoot(), "otelcol-config.yaml"))
	require.NoError(t, err, out)
}

func TestValidateRejectsBadConfig(t *testing.T) {
	base, err := os.ReadFile(filepath.Join(binarytest.RepoRoot(), "otelcol-config.yaml"))
	require.NoError(t, err)

	for name, tc := range map[string]struct {
		from, to string // an edit of the default config
		env      string // an extra environment variable
		want     string // the message must name the field
	}{
		"unknown key": {
			from: "    namespace: ${env:GPUBUILD_CLOUDWATCH_NAMESPACE:-GPUIndexBuild}",
			to:   "    namespace: GPUIndexBuild\n    namespcae: typo",
			want: "namespcae",
		},
		"empty namespace": {
			from: "    namespace: ${env:GPUBUILD_CLOUDWATCH_NAMESPACE:-GPUIndexBuild}",
			to:   `    namespace: ""`,
			want: "namespace",
		},
		"bad duration": {
			from: "    job_timeout: ${env:GPUBUILD_JOB_TIMEOUT:-30m}",
			to:   "    job_timeout: soon",
			want: "job_timeout",
		},
		"bad metrics switch": {
			env:  "GPUBUILD_METRICS_ENABLED=maybe",
			want: "GPUBUILD_METRICS_ENABLED",
		},
		"bad idle memory switch": {
			env:  "GPUBUILD_RELEASE_IDLE_MEMORY=maybe",
			want: "GPUBUILD_RELEASE_IDLE_MEMORY",
		},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := string(base)
			require.Contains(t, cfg, tc.from)
			cfg = strings.Replace(cfg, tc.from, tc.to, 1)
			path := filepath.Join(t.TempDir(), "config.yaml")
			require.NoError(t, os.WriteFile(path, []byte(cfg), 0o600))
			env := cleanEnv(t)
			if tc.env != "" {
				env = append(env, tc.env)
			}
			out, err := runBinary(t, env, "validate", "--config", path)
			require.Error(t, err, "validate must fail:\n%s", out)
			assert.Contains(t, out, tc.want)
		})
	}
}

// putMetricDataLine is the dry-run output: one PutMetricData request per line.
type putMetricDataLine struct {
	Namespace  string
	MetricData []struct {
		MetricName string
		Unit       string
		Value      *float64
		Dimensions []struct{ Name, Value string }
	}
}

func dryRunRequests(stdout string) []putMetricDataLine {
	var reqs []putMetricDataLine
	sc := bufio.NewScanner(strings.NewReader(stdout))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var r putMetricDataLine
		if json.Unmarshal(sc.Bytes(), &r) == nil && r.Namespace != "" {
			reqs = append(reqs, r)
		}
	}
	return reqs
}

// sendGauge exports one gauge point through the real OTel Go SDK over OTLP/HTTP.
func sendGauge(t *testing.T, port int, name string, value float64) {
	t.Helper()
	ctx := context.Background()
	exp, err := otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpoint(fmt.Sprintf("127.0.0.1:%d", port)), otlpmetrichttp.WithInsecure())
	require.NoError(t, err)
	reader := sdkmetric.NewPeriodicReader(exp, sdkmetric.WithInterval(time.Hour))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader),
		sdkmetric.WithResource(resource.NewSchemaless(semconv.ServiceName("distro-test"))))
	gauge, err := mp.Meter("distro-test").Float64Gauge(name, metric.WithUnit("By"))
	require.NoError(t, err)
	gauge.Record(ctx, value)
	require.NoError(t, mp.ForceFlush(ctx))
	require.NoError(t, mp.Shutdown(ctx))
}

func TestDefaultConfigDryRun(t *testing.T) {
	s := startSidecar(t)
	s.waitOutput(t, "dry run", 10*time.Second)

	sendGauge(t, s.httpPort, "distro.smoke.bytes", 42.5)

	deadline := time.Now().Add(30 * time.Second)
	var found bool
	for !found && time.Now().Before(deadline) {
		for _, req := range dryRunRequests(s.Stdout.String()) {
			for _, d := range req.MetricData {
				if d.MetricName == "distro.smoke.bytes" {
					found = true
					assert.Equal(t, "GPUIndexBuild", req.Namespace)
					assert.Equal(t, "Bytes", d.Unit)
					require.NotNil(t, d.Value)
					assert.Equal(t, 42.5, *d.Value)
					assert.Contains(t, d.Dimensions, struct{ Name, Value string }{"service.name", "distro-test"})
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	require.True(t, found, "the gauge never came out of the dry-run exporter:\n%s", s.Output.String())

	// The health endpoint answers on localhost, and SIGTERM shuts down cleanly.
	require.True(t, s.healthy())
	require.NoError(t, s.terminate(t, 20*time.Second), "exit code must be 0 after SIGTERM")
	assert.Contains(t, s.Output.String(), "Shutdown complete")
	assert.NotContains(t, s.Output.String(), "deprecated", "the default config uses no deprecated setting")
}

// The distribution runs its Go code on one P unless GOMAXPROCS is set
// (internal/runtimetuning); the runtime's own default is the CPU count (2 on
// the CI machine; on a 1-CPU machine the first case cannot tell the two
// apart). The scheduler trace shows the setting from outside;
// its first line can come before package init, so only lines written after
// the collector answers its health check count.
func TestOneProcessorUnlessGOMAXPROCSIsSet(t *testing.T) {
	sched := regexp.MustCompile(`SCHED \d+ms: gomaxprocs=(\d+) `)
	for _, tc := range []struct {
		env  []string
		want int
	}{
		{nil, 1},
		{[]string{"GOMAXPROCS=2"}, 2},
		{[]string{"GOMAXPROCS=3"}, 3},
	} {
		s := startSidecar(t, append(tc.env, "GODEBUG=schedtrace=100")...)
		healthyAt := len(s.Output.String())
		var got []string
		require.True(t, binarytest.Eventually(10*time.Second, func() bool {
			got = sched.FindStringSubmatch(s.Output.String()[healthyAt:])
			return got != nil
		}), "no scheduler trace after the health check with %v", tc.env)
		n, err := strconv.Atoi(got[1])
		require.NoError(t, err)
		assert.Equal(t, tc.want, n, "GOMAXPROCS with %v", tc.env)
		require.NoError(t, s.StopSoonAfterReady(20*time.Second)) // can be before otelcol handles SIGTERM
	}
}

func TestNoNVMLStaysHealthy(t *testing.T) {
	// This machine has no NVIDIA driver: the nvml receiver must warn once,
	// stay dormant and never take the collector down, scrape after scrape.
	s := startSidecar(t)
	for i := 0; i < 5; i++ {
		time.Sleep(time.Second) // GPUBUILD_GPU_COLLECTION_INTERVAL=1s
		require.True(t, s.healthy(), "unhealthy after %d collection intervals", i+1)
	}
	logs := s.Output.String()
	assert.Contains(t, strings.ToLower(logs), "nvml")
	assert.NotContains(t, logs, "symbol lookup error")
	require.NoError(t, s.terminate(t, 20*time.Second))
}

func TestMetricsDisabledStaysUp(t *testing.T) {
	s := startSidecar(t, "GPUBUILD_METRICS_ENABLED=false")
	s.waitOutput(t, "Metrics are disabled by GPUBUILD_METRICS_ENABLED=false", 5*time.Second)

	// The service's exports are still accepted (no retry storm in the service) ...
	sendGauge(t, s.httpPort, "distro.disabled.bytes", 1)
	resp, err := http.Post(fmt.Sprintf("http://127.0.0.1:%d/v1/metrics", s.httpPort), "application/json", strings.NewReader(`{}`))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	// ... but nothing is exported, and the sidecar stays healthy.
	time.Sleep(3 * time.Second)
	require.True(t, s.healthy())
	assert.Empty(t, dryRunRequests(s.Stdout.String()))
	assert.Equal(t, 1, strings.Count(s.Output.String(), "Metrics are disabled"), "said once")
	require.NoError(t, s.terminate(t, 20*time.Second))
}

// An OTLP receiver opened beyond loopback without TLS or auth is a
// deployer's decision, said out loud once at start; the default config
// (loopback) says nothing. Both sidecars are stopped as soon as they are
// ready, which can be before otelcol handles SIGTERM: how they stop is not
// what this test is about.
func TestExposedListenerWarning(t *testing.T) {
	const warning = "A receiver listens beyond loopback without TLS or authentication"
	s := startSidecar(t, "GPUBUILD_LISTEN_HOST=0.0.0.0")
	s.waitOutput(t, warning, 10*time.Second)
	logs := s.Output.String()
	assert.Contains(t, logs, `"protocol": "grpc"`)
	assert.Contains(t, logs, `"protocol": "http"`)
	require.NoError(t, s.StopSoonAfterReady(20*time.Second))

	quiet := startSidecar(t)
	require.NoError(t, quiet.StopSoonAfterReady(20*time.Second))
	assert.NotContains(t, quiet.Output.String(), warning)
}

// api.requests from spans (connector) and from histograms (processor) in one
// collector would count every request twice: with
// GPUBUILD_API_REQUESTS_FROM_SPANS=true on the default pipelines the
// processor stands down, says so naming both components and the setting, and
// the sidecar runs.
func TestAPIRequestsFromSpansStandsTheProcessorDown(t *testing.T) {
	s := startSidecar(t, "GPUBUILD_API_REQUESTS_FROM_SPANS=true")
	s.waitOutput(t, "derives nothing", 10*time.Second)
	out := s.Output.String()
	assert.Contains(t, out, `processor "buildjob"`)
	assert.Contains(t, out, `connector "buildjob"`)
	assert.Contains(t, out, "api_requests_from_spans: true")
	require.True(t, s.healthy())
	require.NoError(t, s.StopSoonAfterReady(20*time.Second)) // can be before otelcol handles SIGTERM
}
