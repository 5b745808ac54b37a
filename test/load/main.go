// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Command load is the `make bench` load harness: it drives the built
// bin/otelcol-gpubuild, running the default otelcol-config.yaml, with
// buildsim at a fixed rate (SDK metric data points plus job runs with their
// stage and API spans and status log records) and measures the collector
// from outside: CPU seconds per second from /proc/<pid>/stat, steady and
// peak RSS from /proc/<pid>/status, PutMetricData requests against the lower
// bound ceil(datums/1000) per flush, and delivery completeness against
// buildsim's ground truth. In the same run it measures a baseline, a stock
// ocb build at the same Collector version with otlp -> debug (basic), on the
// same load, and then the highest load the sidecar sustains on one core
// (taskset -c 0) without loss or refusal. It prints a markdown report.
//
//	go run ./test/load                    # what `make bench` runs
//	go run ./test/load -duration 30s -max-rate=false
package main

import (
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"

	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/buildsim"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/promtext"
)

type options struct {
	root         string
	duration     time.Duration
	warmup       time.Duration
	points       int
	jobs         float64
	interval     time.Duration
	fixed        bool
	baseline     bool
	maxRate      bool
	stepDuration time.Duration
	out          string
	peers        bool
	rounds       int
	splice       string
	only         string
	sidecarEnv   envList
}

// envList is a repeatable KEY=VALUE flag.
type envList []string

func (l *envList) String() string { return strings.Join(*l, " ") }

func (l *envList) Set(v string) error {
	if !strings.Contains(v, "=") {
		return fmt.Errorf("%q: want KEY=VALUE", v)
	}
	*l = append(*l, v)
	return nil
}

func main() {
	var o options
	flag.DurationVar(&o.duration, "duration", 60*time.Second, "how long each fixed-rate run sends")
	flag.DurationVar(&o.warmup, "warmup", 10*time.Second, "start of the measured window after the load starts")
	flag.IntVar(&o.points, "points", 10000, "SDK metric data points per second")
	flag.Float64Var(&o.jobs, "jobs", 100, "job runs per second (each with 4 stage spans, 4-6 API spans, 2 status records)")
	flag.DurationVar(&o.interval, "interval", time.Second, "the SDK's export interval in the fixed-rate run (10s with -points 1000 -jobs 1: the team's shape)")
	flag.BoolVar(&o.fixed, "fixed", true, "measure the sidecar at the fixed rate")
	flag.BoolVar(&o.baseline, "baseline", true, "also measure the stock ocb otlp -> debug baseline at the fixed rate")
	flag.BoolVar(&o.maxRate, "max-rate", true, "also search the highest load sustained on one core")
	flag.DurationVar(&o.stepDuration, "step", 20*time.Second, "duration of each step of the max-rate search")
	flag.StringVar(&o.out, "out", "", "also write the markdown report to this file")
	flag.BoolVar(&o.peers, "peers", false, "instead: compare with the contrib assembly and the stock build, side by side (make bench-peers)")
	flag.IntVar(&o.rounds, "rounds", 3, "with -peers: rounds to take medians over")
	flag.StringVar(&o.only, "only", "", "with -peers: measure only the builds and loads whose names contain this text (e.g. \"spans only\"); for profiling one case")
	flag.Var(&o.sidecarEnv, "sidecar-env", "KEY=VALUE added to otelcol-gpubuild's environment only (repeatable; e.g. GOGC=50 to weigh a setting against the peers)")
	flag.StringVar(&o.splice, "splice", "", "also put the report into this markdown file, between the lines <!-- NAME:begin --> and <!-- NAME:end --> (NAME = bench-peers or bench)")
	flag.Parse()

	root, err := repoRoot()
	if err != nil {
		fatal(err)
	}
	o.root = root
	if _, err := os.Stat(filepath.Join(root, "bin", "otelcol-gpubuild")); err != nil {
		fatal(errors.New("bin/otelcol-gpubuild not found: run `make build` first"))
	}
	run := bench
	if o.peers {
		run = benchPeers
	}
	report, err := run(context.Background(), o)
	if err != nil {
		fatal(err)
	}
	fmt.Print(report)
	if o.out != "" {
		if err := os.WriteFile(o.out, []byte(report), 0o644); err != nil {
			fatal(err)
		}
	}
	if o.splice != "" {
		name := "bench"
		if o.peers {
			name = "bench-peers"
		}
		if err := spliceReport(o.splice, name, report); err != nil {
			fatal(err)
		}
	}
}

// spliceReport replaces what stands between the marker lines
// <!-- name:begin --> and <!-- name:end --> in a markdown file.
func spliceReport(path, name, report string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	begin, end := "<!-- "+name+":begin -->\n", "<!-- "+name+":end -->"
	text := string(b)
	i, j := strings.Index(text, begin), strings.Index(text, end)
	if i < 0 || j < i {
		return fmt.Errorf("%s: no %q ... %q section to replace", path, strings.TrimSpace(begin), end)
	}
	text = text[:i+len(begin)] + report + text[j:]
	return os.WriteFile(path, []byte(text), 0o644)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "load:", err)
	os.Exit(1)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "load: "+format+"\n", args...)
}

// repoRoot finds the checkout root from the working directory.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.Contains(string(b), "module github.com/gpubuild/otelcol-gpubuild\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("run from inside the otelcol-gpubuild checkout")
		}
		dir = parent
	}
}

// load is a fixed rate of telemetry.
type load struct {
	points   int     // SDK data points per second
	jobs     float64 // job runs per second
	interval time.Duration
	duration time.Duration
}

func (l load) String() string {
	s := fmt.Sprintf("%d points/s + %g jobs/s", l.points, l.jobs)
	if l.interval != time.Second {
		s += fmt.Sprintf(", exported every %v", l.interval)
	}
	return s
}

// simConfig makes buildsim produce the load: one SDK export per interval
// with l.points*interval points (three instruments with MetricSeries extra
// series each, plus the series the jobs themselves create).
func simConfig(l load, endpoint string) buildsim.Config {
	cfg := buildsim.DefaultConfig()
	cfg.Endpoint = endpoint
	cfg.ServiceName = "build-load"
	cfg.Rate = l.jobs
	cfg.Jobs = int(math.Round(l.jobs * l.duration.Seconds()))
	cfg.MetricInterval = l.interval
	perExport := int(math.Round(float64(l.points) * l.interval.Seconds()))
	jobSeries := len(cfg.Engines)*cfg.Tenants + len(cfg.Engines)*len(cfg.DataTypes) + cfg.GPUs
	cfg.MetricSeries = max(0, (perExport-jobSeries)/3)
	cfg.RetryMaxElapsed = 30 * time.Second
	cfg.ExportTimeout = 10 * time.Second
	// Collections above 5000 points go in several requests (a whole 30k
	// point collection would pass the receiver's 4 MiB limit); a multiple of
	// 1000 keeps the per-flush PutMetricData bound reachable.
	cfg.MetricMaxBatch = 5000
	return cfg
}

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

// run starts the target, sends the load, and measures it. cw is the
// CloudWatch test endpoint behind the sidecar (nil for the baseline).
func run(ctx context.Context, t target, l load, warmup time.Duration, cw *cloudwatchtest.Server, cpus string) (*result, error) {
	if cw != nil {
		cw.Reset()
	}
	p, err := startProcess(t.argv, t.env, cpus)
	if err != nil {
		return nil, err
	}
	defer func() {
		if !p.Exited() {
			p.Kill()
		}
	}()
	if err := p.AwaitListening(t.grpcAddr, 60*time.Second); err != nil {
		return nil, fmt.Errorf("%s: %w", t.name, err)
	}
	time.Sleep(time.Second) // let it settle after start

	res := &result{target: t.name, load: l, cw: cw != nil}
	simDone := make(chan struct{})
	var simErr error
	go func() {
		defer close(simDone)
		res.sim, simErr = buildsim.Run(ctx, simConfig(l, t.grpcAddr))
	}()

	// The measured window: from warmup until the load stops.
	select {
	case <-time.After(warmup):
	case <-simDone:
		return nil, fmt.Errorf("%s: the load ended before the warmup (%v): %v", t.name, warmup, simErr)
	}
	cpu0, err := cpuSeconds(p.Pid())
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	var rss, anon, binary, otherFile []float64
	tick := time.NewTicker(time.Second)
sampling:
	for {
		select {
		case <-simDone:
			break sampling
		case <-tick.C:
			if r, _, err := binarytest.MemKiB(p.Pid()); err == nil {
				rss = append(rss, float64(r)/1024)
			}
			if a, err := binarytest.AnonKiB(p.Pid()); err == nil {
				anon = append(anon, float64(a)/1024)
			}
			if b, o, err := fileRSS(p.Pid()); err == nil {
				binary, otherFile = append(binary, float64(b)/1024), append(otherFile, float64(o)/1024)
			}
		}
	}
	tick.Stop()
	cpu1, err := cpuSeconds(p.Pid())
	if err != nil {
		return nil, err
	}
	res.cpuCores = (cpu1 - cpu0) / time.Since(t0).Seconds()
	_, hwm, _ := binarytest.MemKiB(p.Pid())
	res.peakMiB = float64(hwm) / 1024
	res.rssMiB, res.anonMiB = median(rss), median(anon)
	res.binaryMiB, res.otherFileMiB = median(binary), median(otherFile)
	if simErr != nil {
		return nil, fmt.Errorf("%s: buildsim: %w", t.name, simErr)
	}
	refused, heapBytes := scrapeTelemetry(t.telemetry)
	res.refused, res.heapMiB = refused, heapBytes/(1<<20)

	if cw != nil {
		// Wait for the last derived flush and the queue to drain.
		start := time.Now()
		truth := res.jobsTruth()
		for time.Since(start) < 60*time.Second {
			if landed(cw.Datums(), "build.jobs") >= truth && landed(cw.Datums(), buildsim.CounterName) >= float64(res.sim.SDKMetrics.Counter.Total) {
				res.drained = true
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		res.drainedIn = time.Since(start)
	}
	_, res.exitErr = p.Stop(60 * time.Second)
	if cw != nil {
		datums := cw.Datums()
		st := cw.Stats()
		res.requests = st.Accepted
		res.datums = len(datums)
		res.lowerBound = lowerBound(datums)
		res.jobsLanded = landed(datums, "build.jobs")
		res.counterLanded = landed(datums, buildsim.CounterName)
	}
	return res, nil
}

// scrapeTelemetry reads the refused items and the heap from the
// collector's own telemetry; NaN when it cannot be read.
func scrapeTelemetry(addr string) (refused, heapBytes float64) {
	f, err := promtext.Scrape(addr)
	if err != nil {
		return math.NaN(), math.NaN()
	}
	for _, name := range []string{"otelcol_receiver_refused_spans", "otelcol_receiver_refused_metric_points", "otelcol_receiver_refused_log_records"} {
		v, _ := f.Sum(name, nil)
		refused += v
	}
	heapBytes, _ = f.Sum("otelcol_process_runtime_heap_alloc_bytes", nil)
	return refused, heapBytes
}

// landed sums the values CloudWatch accepted for a metric.
func landed(datums []cloudwatchtest.Datum, name string) float64 {
	var sum float64
	for _, d := range datums {
		if d.MetricName != name {
			continue
		}
		switch {
		case d.Value != nil:
			sum += *d.Value
		case d.Statistics != nil:
			sum += d.Statistics.Sum
		default:
			for i, v := range d.Values {
				c := 1.0
				if i < len(d.Counts) {
					c = d.Counts[i]
				}
				sum += v * c
			}
		}
	}
	return sum
}

// lowerBound is the fewest PutMetricData requests that could carry the
// datums if each flush is sent on its own: ceil(n/1000) for each flush. A
// flush is recognised by its timestamp: the datums of one SDK export or one
// derived-metrics flush all carry the same timestamp. An exporter that
// merges flushes can do better, down to ceil(all datums/1000).
func lowerBound(datums []cloudwatchtest.Datum) int {
	byTime := map[int64]int{}
	for _, d := range datums {
		byTime[d.Timestamp.UnixNano()]++
	}
	n := 0
	for _, c := range byTime {
		n += (c + 999) / 1000
	}
	return n
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	sort.Float64s(s)
	return s[len(s)/2]
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

func bench(ctx context.Context, o options) (string, error) {
	cw, err := cloudwatchtest.Start("127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = cw.Close() }()
	tmp, err := os.MkdirTemp("", "otelcol-gpubuild-load-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(tmp) }()

	fixed := load{points: o.points, jobs: o.jobs, interval: o.interval, duration: o.duration}
	var ours, base *result
	if o.fixed {
		logf("sidecar at %v for %v", fixed, o.duration)
		st, err := sidecarTarget(o.root, cw, filepath.Join(tmp, "queue"))
		if err != nil {
			return "", err
		}
		if ours, err = run(ctx, st, fixed, o.warmup, cw, ""); err != nil {
			return "", err
		}
	}
	if o.fixed && o.baseline {
		bin, err := buildWithOCB(o.root, "baseline-builder-config.yaml", filepath.Join("baseline", "otelcol-baseline"))
		if err != nil {
			return "", err
		}
		bt, err := baselineTarget(bin, tmp)
		if err != nil {
			return "", err
		}
		logf("baseline at %v for %v", fixed, o.duration)
		if base, err = run(ctx, bt, fixed, o.warmup, nil, ""); err != nil {
			return "", err
		}
	}

	var steps []*result
	var stopReason string
	if o.maxRate {
		steps, stopReason = maxRate(ctx, o, cw, tmp)
	}
	return report(o, ours, base, steps, stopReason), nil
}

// maxRate raises the load in steps with the sidecar pinned to CPU 0 until
// a step loses or refuses data, cannot keep up, or saturates the core. The
// number of series stays that of the fixed-rate run; the SDK exports more
// often (1 s / factor): the search is for a rate, and more series would
// hit cumulative_state.max_series first.
func maxRate(ctx context.Context, o options, cw *cloudwatchtest.Server, tmp string) ([]*result, string) {
	var steps []*result
	for i, factor := range []float64{1, 2, 3, 4, 6, 8, 12, 16} {
		l := load{points: int(float64(o.points) * factor), jobs: o.jobs * factor, interval: time.Duration(float64(time.Second) / factor), duration: o.stepDuration}
		logf("one core: %v for %v", l, o.stepDuration)
		// No request cap here: the search is for the collector's limit, not
		// the configured CloudWatch request budget.
		st, err := sidecarTarget(o.root, cw, filepath.Join(tmp, fmt.Sprintf("queue-%d", i)), "GPUBUILD_CLOUDWATCH_MAX_RPS=0")
		if err != nil {
			return steps, err.Error()
		}
		r, err := run(ctx, st, l, o.stepDuration/4, cw, "0")
		if err != nil {
			return steps, err.Error()
		}
		steps = append(steps, r)
		switch {
		case r.refused > 0:
			return steps, fmt.Sprintf("at %v the receiver refused %v items", l, r.refused)
		case !r.sim.Exports.Complete():
			return steps, fmt.Sprintf("at %v exports failed for good", l)
		case !r.exact():
			return steps, fmt.Sprintf("at %v delivery was not exact (jobs %v/%v, counter %v/%v)", l, r.jobsLanded, r.jobsTruth(), r.counterLanded, r.sim.SDKMetrics.Counter.Total)
		case r.sim.Elapsed > o.stepDuration.Seconds()*1.1+5:
			return steps, fmt.Sprintf("at %v the load could not be sent on time (%.0f s for %v): the collector (or the load generator sharing the machine) could not keep up", l, r.sim.Elapsed, o.stepDuration)
		case r.cpuCores > 0.95:
			return steps, fmt.Sprintf("at %v the core was saturated (%.2f)", l, r.cpuCores)
		case !r.loadSent():
			return steps, fmt.Sprintf("at %v the load generator, on the same machine, sent only %.0f points/s while the collector used %.2f of its core: the collector's limit is above what this machine can generate",
				l, rate(r.sim.Exports.MetricPoints.Items, r), r.cpuCores)
		}
	}
	return steps, "the highest step passed"
}
