// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package fleet drives a fleet of the built binary: sidecars that send
// through the shipped otelcol-config.yaml with GPUBUILD_DESTINATIONS=gateway to gateways on the shipped
// otelcol-gateway.yaml, into the local CloudWatch endpoint.
package fleet

import (
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/buildsim"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/promtext"
)

const namespace = "GPUBuild/Fleet"

// node is one collector process with its listeners.
type node struct {
	*binarytest.Process
	t                       testing.TB
	config                  string
	env                     []string
	grpc, health, telemetry int
	handoff                 int // a gateway's otlp/handoff receiver
	queueDir                string
	args                    []string // past --config
}

// gatewayFeatureGate turns the health check's component status on: the
// gateway's config needs it (deploy/gateway-kubernetes.yaml passes it).
const gatewayFeatureGate = "--feature-gates=+extension.healthcheck.useComponentStatus"

func baseEnv() []string {
	env := binarytest.EnvWithout("AWS_", "GPUBUILD_", "OTEL_")
	return append(env,
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_ACCESS_KEY_ID=AKIDTESTFLEET0000001",
		"AWS_SECRET_ACCESS_KEY=fleetsecret",
		"AWS_CONFIG_FILE=/dev/null",
		"AWS_SHARED_CREDENTIALS_FILE=/dev/null",
		"AWS_REGION=us-east-1",
		"GPUBUILD_LISTEN_HOST=127.0.0.1",
		"GPUBUILD_LOG_LEVEL=warn",
	)
}

func newNode(t testing.TB, config string, extra ...string) *node {
	n := &node{t: t, config: filepath.Join(binarytest.RepoRoot(), config), queueDir: t.TempDir()}
	n.pickPorts()
	n.env = extra
	if config == gatewayConfig {
		n.args = []string{gatewayFeatureGate}
	}
	return n
}

const gatewayConfig = "otelcol-gateway.yaml"

// pickPorts chooses the listeners' ports. A gateway keeps its ports across
// restarts (the sidecars' lists name them; they stay this test process's,
// binarytest.PickFreePorts); some tests give a sidecar new ones before a
// restart, as a rescheduled pod gets.
func (n *node) pickPorts() {
	n.grpc, n.health, n.telemetry = binarytest.FreePort(n.t), binarytest.FreePort(n.t), binarytest.FreePort(n.t)
	n.handoff = binarytest.FreePort(n.t)
}

// start runs the node (again, on the same queue directory); later entries of
// env win.
func (n *node) start() {
	n.t.Helper()
	env := append(baseEnv(),
		fmt.Sprintf("GPUBUILD_OTLP_GRPC_PORT=%d", n.grpc),
		fmt.Sprintf("GPUBUILD_OTLP_HTTP_PORT=%d", binarytest.FreePort(n.t)),
		fmt.Sprintf("GPUBUILD_HEALTH_PORT=%d", n.health),
		fmt.Sprintf("GPUBUILD_TELEMETRY_PORT=%d", n.telemetry),
		fmt.Sprintf("GPUBUILD_GATEWAY_HANDOFF_PORT=%d", n.handoff),
		"GPUBUILD_QUEUE_DIR="+n.queueDir,
	)
	env = append(env, n.env...)
	n.Process = binarytest.StartBinary(n.t, env, append([]string{"--config", n.config}, n.args...)...)
	require.NoError(n.t, n.AwaitHealthy(fmt.Sprintf("http://127.0.0.1:%d/", n.health), 60*time.Second))
}

func (n *node) flushes() float64 { return n.telemetryValue("otelcol_intervalmerge_flushes") }

// pointsHeld is how many data points the gateway's open interval holds
// (acknowledged, in its journal, not yet handed to its exporter).
func (n *node) pointsHeld() float64 { return n.telemetryValue("otelcol_intervalmerge_points_held") }

// duplicates is how many requests the gateway dropped as sent again.
func (n *node) duplicates() float64 {
	return n.telemetryValue("otelcol_intervalmerge_requests_duplicate")
}

func (n *node) telemetryValue(name string) float64 {
	f, err := promtext.Scrape(fmt.Sprintf("127.0.0.1:%d", n.telemetry))
	require.NoError(n.t, err)
	v, _ := f.Sum(name, nil)
	return v
}

// gatewayEnv points a gateway at the local CloudWatch endpoint with a short
// interval.
func gatewayEnv(cw *cloudwatchtest.Server, interval time.Duration) []string {
	return []string{
		"GPUBUILD_CLOUDWATCH_OUTPUT=cloudwatch",
		"GPUBUILD_CLOUDWATCH_ENDPOINT=" + cw.Endpoint(),
		"GPUBUILD_CLOUDWATCH_NAMESPACE=" + namespace,
		"GPUBUILD_CLOUDWATCH_MAX_RPS=0",
		"GPUBUILD_GATEWAY_INTERVAL=" + interval.String(),
		"GPUBUILD_MEMORY_LIMIT_MIB=300",
		"GPUBUILD_MEMORY_SPIKE_LIMIT_MIB=60",
	}
}

// sidecarEnv points a sidecar at a gateway, with the shipped exporter
// settings (timeout included: a gateway answers at once) and 1 s flushes.
// sidecarConfig is a fleet sidecar's configuration: the default one, with
// GPUBUILD_DESTINATIONS=gateway (sidecarEnvAt).
const sidecarConfig = "otelcol-config.yaml"

func sidecarEnv(gateway *node) []string {
	return sidecarEnvAt(fmt.Sprintf("127.0.0.1:%d", gateway.grpc))
}

func sidecarEnvAt(endpoint string) []string {
	return []string{
		"GPUBUILD_DESTINATIONS=gateway",
		"GPUBUILD_GATEWAY_ENDPOINT=" + endpoint,
		"GPUBUILD_FLUSH_INTERVAL=1s",
		"GPUBUILD_API_REQUESTS_FROM_SPANS=true",
		"GPUBUILD_GPU_COLLECTION_INTERVAL=1h",
		"GPUBUILD_MEMORY_LIMIT_MIB=120",
		"GPUBUILD_MEMORY_SPIKE_LIMIT_MIB=30",
	}
}

// workload is one worker's build service.
func workload(sidecar *node, worker int) buildsim.Config {
	cfg := buildsim.DefaultConfig()
	cfg.Endpoint = fmt.Sprintf("127.0.0.1:%d", sidecar.grpc)
	cfg.ServiceName = "vector-index-build"
	cfg.InstanceID = fmt.Sprintf("worker-%02d", worker)
	cfg.Seed = int64(1000 + worker)
	cfg.Jobs = 30
	cfg.Rate = 2
	cfg.FailureRatio = 0.15
	cfg.CancelRatio = 0.05
	// Spans and job logs only: every metric the sidecar sends is a derived
	// delta series, which the gateways merge. (A service's own cumulative
	// metrics would stay per worker; docs/fleet.md.)
	cfg.Metrics = false
	cfg.APIMetrics = false
	cfg.RetryMaxElapsed = 2 * time.Minute
	return cfg
}

// truth adds up the workers' ground truths per series.
type truth map[string]*seriesTruth

type seriesTruth struct {
	metric string
	dims   map[string]string
	count  int64
	stat   buildsim.Stat
	hist   string
}

func (tr truth) add(metric, hist string, series []buildsim.Series, dims map[string]string) {
	for _, s := range series {
		d := map[string]string{}
		for k, v := range s.Attributes {
			d[k] = v
		}
		for k, v := range dims {
			d[k] = v
		}
		k := metric + "{" + dimKey(d) + "}"
		e := tr[k]
		if e == nil {
			e = &seriesTruth{metric: metric, hist: hist, dims: d}
			tr[k] = e
		}
		e.count += s.Count
		if e.stat.Count == 0 {
			e.stat = s.Duration
		} else if s.Duration.Count > 0 {
			e.stat.Count += s.Duration.Count
			e.stat.Sum += s.Duration.Sum
			e.stat.Min = math.Min(e.stat.Min, s.Duration.Min)
			e.stat.Max = math.Max(e.stat.Max, s.Duration.Max)
		}
	}
}

func dimKey(d map[string]string) string {
	keys := make([]string, 0, len(d))
	for k := range d {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s,", k, d[k])
	}
	return b.String()
}

// landed sums the datums of metric whose dimensions include dims: the
// counter's total, and the histogram's count, sum, min and max.
func landed(datums []cloudwatchtest.Datum, metric string, dims map[string]string) (sum float64, st buildsim.Stat) {
	st.Min, st.Max = math.Inf(1), math.Inf(-1)
	see := func(v float64) { st.Min = math.Min(st.Min, v); st.Max = math.Max(st.Max, v) }
	for _, d := range datums {
		if d.MetricName != metric || !hasDims(d, dims) {
			continue
		}
		switch {
		case d.Statistics != nil:
			st.Count += int64(d.Statistics.SampleCount)
			st.Sum += d.Statistics.Sum
			see(d.Statistics.Minimum)
			see(d.Statistics.Maximum)
		case len(d.Values) > 0:
			for i, v := range d.Values {
				c := 1.0
				if i < len(d.Counts) {
					c = d.Counts[i]
				}
				st.Count += int64(c)
				st.Sum += v * c
				see(v)
			}
		case d.Value != nil:
			sum += *d.Value
			st.Count++
			see(*d.Value)
		}
	}
	return sum, st
}

func hasDims(d cloudwatchtest.Datum, want map[string]string) bool {
	for k, v := range want {
		if d.Dimensions[k] != v {
			return false
		}
	}
	return true
}

func almostEqual(a, b float64) bool {
	return a == b || math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b))
}

// mismatches lists every series whose landed counter or histogram differs
// from the truth.
func (tr truth) mismatches(datums []cloudwatchtest.Datum) []string {
	var out []string
	for k, e := range tr {
		sum, _ := landed(datums, e.metric, e.dims)
		if sum != float64(e.count) {
			out = append(out, fmt.Sprintf("%s: landed %v, want %d", k, sum, e.count))
		}
		if e.hist == "" || e.stat.Count == 0 {
			continue
		}
		_, st := landed(datums, e.hist, e.dims)
		if st.Count != e.stat.Count || !almostEqual(st.Sum, e.stat.Sum) || st.Min != e.stat.Min || st.Max != e.stat.Max {
			out = append(out, fmt.Sprintf("%s{%s}: landed count %d sum %v min %v max %v, want %+v", e.hist, dimKey(e.dims), st.Count, st.Sum, st.Min, st.Max, e.stat))
		}
	}
	sort.Strings(out)
	return out
}

// addService adds what one build service generated (its job runs, stage
// runs and API requests, under its service.name) to the truth.
func (tr truth) addService(g buildsim.Totals) {
	service := map[string]string{"service.name": "vector-index-build"}
	tr.add("build.jobs", "build.job.duration", g.Jobs, service)
	tr.add("build.stage.runs", "build.stage.duration", g.StageRuns, service)
	tr.add("api.requests", "api.request.duration", g.APIRequests, service)
}

// requireLanded waits up to timeout for every series of the truth to land
// exactly at cw, and fails naming the first that differ.
func (tr truth) requireLanded(t testing.TB, cw *cloudwatchtest.Server, timeout time.Duration) {
	t.Helper()
	var last []string
	ok := binarytest.Eventually(timeout, func() bool {
		last = tr.mismatches(cw.Datums())
		return len(last) == 0
	})
	require.True(t, ok, "%d series differ, e.g.\n%v", len(last), head(last, 20))
}
