// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/buildsim"
)

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

func rate(items int64, r *result) float64 {
	if r.sim.Elapsed <= 0 {
		return 0
	}
	return float64(items) / r.sim.Elapsed
}

func ratio(a, b float64) string {
	if b <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "**no**"
}

func report(o options, ours, base *result, steps []*result, stopReason string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Load benchmark (`make bench`)\n\n")
	fmt.Fprintf(&b, "Machine: %d CPUs (%s), %s, measured %s.\n", runtime.NumCPU(), cpuModel(), runtime.Version(), time.Now().UTC().Format("2006-01-02"))
	interval := ""
	if o.interval != time.Second {
		interval = fmt.Sprintf(" -interval %v", o.interval)
	}
	fmt.Fprintf(&b, "Command: `go run ./test/load -duration %v -warmup %v -points %d -jobs %g%s` (what `make bench` runs with the defaults).\n", o.duration, o.warmup, o.points, o.jobs, interval)
	if ours != nil {
		fmt.Fprintf(&b, "Load: buildsim over OTLP/gRPC, %v for %v; CPU and median RSS over the window after the %v warmup; peak = VmHWM. ", ours.load, o.duration, o.warmup)
		fmt.Fprintf(&b, "The sidecar runs the default `otelcol-config.yaml` (file_storage queue, the admission extension's heap check, buildjob connector and processor, cloudwatch exporter) against the CloudWatch test endpoint; the load generator and the endpoint run in the harness process on the same machine.\n\n")

		baseCol := func(f func(*result) string) string {
			if base == nil {
				return "not measured"
			}
			return f(base)
		}
		fmt.Fprintf(&b, "| | otelcol-gpubuild | baseline: ocb v0.161.0 otlp → debug (basic) | ratio |\n|---|---|---|---|\n")
		row := func(name string, ourVal, baseVal, r string) {
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", name, ourVal, baseVal, r)
		}
		baseRatio := func(a float64, f func(*result) float64) string {
			if base == nil {
				return "–"
			}
			return ratio(a, f(base))
		}
		row("CPU (cores = CPU s/s)", fmt.Sprintf("%.3f", ours.cpuCores), baseCol(func(r *result) string { return fmt.Sprintf("%.3f", r.cpuCores) }),
			baseRatio(ours.cpuCores, func(r *result) float64 { return r.cpuCores }))
		row("RSS steady, median (MiB)", fmt.Sprintf("%.1f", ours.rssMiB), baseCol(func(r *result) string { return fmt.Sprintf("%.1f", r.rssMiB) }),
			baseRatio(ours.rssMiB, func(r *result) float64 { return r.rssMiB }))
		split := func(r *result) string {
			return fmt.Sprintf("%.1f / %.1f / %.1f", r.anonMiB, r.binaryMiB, r.otherFileMiB)
		}
		row("RSS split: anonymous / the binary's pages / other files (MiB)", split(ours), baseCol(split), "")
		row("Go heap in use at the end (MiB)", fmt.Sprintf("%.1f", ours.heapMiB), baseCol(func(r *result) string { return fmt.Sprintf("%.1f", r.heapMiB) }),
			baseRatio(ours.heapMiB, func(r *result) float64 { return r.heapMiB }))
		row("RSS peak, VmHWM (MiB)", fmt.Sprintf("%.1f", ours.peakMiB), baseCol(func(r *result) string { return fmt.Sprintf("%.1f", r.peakMiB) }),
			baseRatio(ours.peakMiB, func(r *result) float64 { return r.peakMiB }))
		sent := func(r *result) string {
			e := r.sim.Exports
			return fmt.Sprintf("%.0f points/s, %.0f spans/s, %.0f records/s", rate(e.MetricPoints.Items, r), rate(e.Spans.Items, r), rate(e.LogRecords.Items, r))
		}
		row("Sent (acknowledged)", sent(ours), baseCol(sent), "")
		row("Refused by the receiver", fmt.Sprintf("%.0f", ours.refused), baseCol(func(r *result) string { return fmt.Sprintf("%.0f", r.refused) }), "")
		absBound := (ours.datums + 999) / 1000
		row("PutMetricData requests", fmt.Sprintf("%d (bounds: Σ⌈datums/1000⌉ per flush %d; ⌈all datums/1000⌉ %d)", ours.requests, ours.lowerBound, absBound), "–",
			fmt.Sprintf("%s per-flush bound, %s absolute bound", ratio(float64(ours.requests), float64(ours.lowerBound)), ratio(float64(ours.requests), float64(absBound))))
		row("Datums landed", fmt.Sprintf("%d", ours.datums), "–", "")
		row("Delivery exact", fmt.Sprintf("%s: build.jobs %.0f of %.0f; %s %.0f of %d", yesNo(ours.exact()), ours.jobsLanded, ours.jobsTruth(),
			buildsim.CounterName, ours.counterLanded, ours.sim.SDKMetrics.Counter.Total), "–", "")
		row("Drained after the load stopped", fmt.Sprintf("%.1f s (derived metrics flush every 10 s by default)", ours.drainedIn.Seconds()), "–", "")
		fmt.Fprintf(&b, "\nTargets at this load: under 0.10 cores (%s) and under 60 MiB RSS (%s).\n",
			yesNo(ours.cpuCores < 0.10), yesNo(ours.peakMiB < 60))
	}

	if len(steps) > 0 || stopReason != "" {
		fmt.Fprintf(&b, "\n### Highest load sustained on one core (`taskset -c 0`, `GPUBUILD_CLOUDWATCH_MAX_RPS=0`, %v per step)\n\n", o.stepDuration)
		fmt.Fprintf(&b, "Each step multiplies the fixed load; the series stay the same and the SDK exports more often (every 1 s / factor).\n\n")
		fmt.Fprintf(&b, "| load | sent points/s | sent spans/s | CPU (cores) | RSS peak (MiB) | refused | delivery exact | PutMetricData / bound |\n|---|---|---|---|---|---|---|---|\n")
		var best *result
		for _, r := range steps {
			e := r.sim.Exports
			fmt.Fprintf(&b, "| %v | %.0f | %.0f | %.3f | %.1f | %.0f | %s | %d / %d |\n", r.load, rate(e.MetricPoints.Items, r), rate(e.Spans.Items, r),
				r.cpuCores, r.peakMiB, r.refused, yesNo(r.exact()), r.requests, r.lowerBound)
		}
		for _, r := range steps {
			if r.exact() && r.refused == 0 && r.cpuCores <= 0.95 && r.sim.Elapsed <= o.stepDuration.Seconds()*1.1+5 && r.loadSent() {
				best = r
			}
		}
		if best != nil {
			fmt.Fprintf(&b, "\nHighest passing step: %v. ", best.load)
		}
		fmt.Fprintf(&b, "Stopped: %s.\n", stopReason)
	}
	return b.String()
}
