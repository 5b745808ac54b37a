// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/buildsim"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
)

// target is a collector binary with its configuration.
type target struct {
	name      string
	argv      []string
	env       []string
	grpcAddr  string
	telemetry string // host:port of its Prometheus telemetry
}

// result is one measured run.
type result struct {
	target   string
	load     load
	cpuCores float64 // CPU seconds per second over the measured window
	// startCPU is the CPU seconds the process used before the window: its
	// start, settling, and the warmup's load.
	startCPU float64
	rssMiB   float64 // median VmRSS over the measured window
	anonMiB  float64 // median RssAnon over the measured window
	// Medians of the file-backed RSS: the executable's pages, and every
	// other file's (memory-mapped state, shared libraries).
	binaryMiB, otherFileMiB float64
	peakMiB                 float64 // VmHWM at the end of the load
	sim                     *buildsim.Summary
	refused                 float64 // data the receiver refused (its own telemetry)
	heapMiB                 float64 // Go heap in use at the end of the window (its own telemetry)

	// Only for the sidecar (CloudWatch test endpoint behind it).
	cw            bool
	requests      int
	lowerBound    int
	datums        int
	jobsLanded    float64
	counterLanded float64
	drainedIn     time.Duration
	drained       bool
	exitErr       error
}

func (r *result) jobsTruth() float64 {
	var n int64
	for _, s := range r.sim.Generated.Jobs {
		n += s.Count
	}
	return float64(n)
}

// loadSent says whether the generator sent at least 85 % of the points the
// load asked for (on a small machine it competes with the collector).
func (r *result) loadSent() bool {
	return rate(r.sim.Exports.MetricPoints.Items, r) >= 0.85*float64(r.load.points)
}

func (r *result) exact() bool {
	return r.cw && r.jobsLanded == r.jobsTruth() && r.counterLanded == float64(r.sim.SDKMetrics.Counter.Total)
}

// sidecarTarget runs the built binary on the default config through its
// environment variables, sending to the CloudWatch test endpoint.
func sidecarTarget(root string, cw *cloudwatchtest.Server, queueDir string, extraEnv ...string) (target, error) {
	ports, err := binarytest.PickFreePorts(4)
	if err != nil {
		return target{}, err
	}
	env := baseEnv()
	env = append(env,
		"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=AKIDLOADTEST", "AWS_SECRET_ACCESS_KEY=load-test-secret",
		"AWS_EC2_METADATA_DISABLED=true",
		"GPUBUILD_CLOUDWATCH_OUTPUT=cloudwatch",
		"GPUBUILD_CLOUDWATCH_ENDPOINT="+cw.Endpoint(),
		"GPUBUILD_QUEUE_DIR="+queueDir,
		"GPUBUILD_OTLP_GRPC_PORT="+strconv.Itoa(ports[0]),
		"GPUBUILD_OTLP_HTTP_PORT="+strconv.Itoa(ports[1]),
		"GPUBUILD_HEALTH_PORT="+strconv.Itoa(ports[2]),
		"GPUBUILD_TELEMETRY_PORT="+strconv.Itoa(ports[3]),
	)
	env = append(env, extraEnv...)
	return target{
		name:      "otelcol-gpubuild",
		argv:      []string{filepath.Join(root, "bin", "otelcol-gpubuild"), "--config", filepath.Join(root, "otelcol-config.yaml")},
		env:       env,
		grpcAddr:  fmt.Sprintf("127.0.0.1:%d", ports[0]),
		telemetry: fmt.Sprintf("127.0.0.1:%d", ports[3]),
	}, nil
}

// baselineTarget runs the stock build: otlp -> debug (basic), with the same
// telemetry (normal level, Prometheus pull) as the sidecar's default config.
func baselineTarget(bin, dir string) (target, error) {
	return peerTarget("baseline (ocb otlp -> debug basic)", bin, filepath.Join(dir, "baseline.yaml"), `exporters:
  debug:
    verbosity: basic
service:
  pipelines:
    traces: {receivers: [otlp], exporters: [debug]}
    logs: {receivers: [otlp], exporters: [debug]}
    metrics: {receivers: [otlp], exporters: [debug]}
`, baseEnv())
}

// peerTarget writes the config of a collector the sidecar is compared
// with, at path: the otlp receiver on loopback, then components (YAML from
// the first section after receivers down to service's pipelines), then the
// sidecar's default telemetry (normal level, Prometheus pull).
func peerTarget(name, bin, path, components string, env []string) (target, error) {
	ports, err := binarytest.PickFreePorts(3)
	if err != nil {
		return target{}, err
	}
	cfg := fmt.Sprintf(`receivers:
  otlp:
    protocols:
      grpc: {endpoint: "127.0.0.1:%d"}
      http: {endpoint: "127.0.0.1:%d"}
%s  telemetry:
    metrics:
      level: normal
      readers:
        - pull:
            exporter:
              prometheus: {host: 127.0.0.1, port: %d}
`, ports[0], ports[1], components, ports[2])
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return target{}, err
	}
	return target{
		name:      name,
		argv:      []string{bin, "--config", path},
		env:       env,
		grpcAddr:  fmt.Sprintf("127.0.0.1:%d", ports[0]),
		telemetry: fmt.Sprintf("127.0.0.1:%d", ports[2]),
	}, nil
}

func baseEnv() []string {
	return binarytest.EnvWithout("AWS_", "GPUBUILD_", "OTEL_", "GOMAXPROCS=")
}

// buildWithOCB builds a collector from a manifest under test/load with ocb
// into the gitignored test/load/.build, unless the binary is newer than its
// manifest. bin is relative to test/load/.build.
func buildWithOCB(root, manifest, bin string) (string, error) {
	manifest = filepath.Join(root, "test", "load", manifest)
	bin = filepath.Join(root, "test", "load", ".build", bin)
	mi, err := os.Stat(manifest)
	if err != nil {
		return "", err
	}
	if bi, err := os.Stat(bin); err == nil && bi.ModTime().After(mi.ModTime()) {
		return bin, nil
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return "", err
	}
	logf("building %s with ocb (once; a minute or more)", filepath.Base(manifest))
	cmd := exec.Command(filepath.Join(root, ".tools", "bin", "builder"), "--config", manifest)
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building %s (is .tools/bin/builder built? `make tools`): %w", manifest, err)
	}
	return bin, nil
}
