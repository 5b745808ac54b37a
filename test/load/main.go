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
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/buildsim"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
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
	pin          string
	idleWindow   time.Duration
	compare      string
}

// defaultIdleWindow is long enough for the timers of an idle collector
// (seconds to a minute apart) to show in its CPU; the builds are measured
// side by side, so a round spends it once.
const defaultIdleWindow = 2 * time.Minute

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
	flag.StringVar(&o.pin, "pin", "auto", "with -peers: the CPUs (taskset -c) every collector runs on; auto: the last CPU where taskset exists and there are two or more, off: none")
	flag.DurationVar(&o.idleWindow, "idle-window", defaultIdleWindow, "with -peers: how long the idle builds are measured side by side each round (CPU, wake-ups, RSS), after 10 s to settle")
	flag.StringVar(&o.compare, "compare", "", "with -peers: also measure the build in this other checkout (its bin/otelcol-gpubuild on its otelcol-config.yaml, e.g. a worktree of an earlier commit, built): a change's cost, in the same rounds")
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
