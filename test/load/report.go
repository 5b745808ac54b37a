package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/gpubuild/otelcol-gpubuild/internal/buildsim"
	"github.com/gpubuild/otelcol-gpubuild/internal/cloudwatchtest"
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
	fmt.Fprintf(&b, "Command: `go run ./test/load -duration %v -warmup %v -points %d -jobs %g` (what `make bench` runs with the defaults).\n", o.duration, o.warmup, o.points, o.jobs)
	fmt.Fprintf(&b, "Load: buildsim over OTLP/gRPC, %v for %v; CPU and median RSS over the window after the %v warmup; peak = VmHWM. ", ours.load, o.duration, o.warmup)
	fmt.Fprintf(&b, "The sidecar runs the default `otelcol-config.yaml` (file_storage queue, memory_limiter, buildjob connector and processor, cloudwatch exporter) against the CloudWatch test endpoint; the load generator and the endpoint run in the harness process on the same machine.\n\n")

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
	fmt.Fprintf(&b, "\nIssue 6 targets at this load: under 0.10 cores (%s) and under 60 MiB RSS (%s).\n",
		yesNo(ours.cpuCores < 0.10), yesNo(ours.peakMiB < 60))

	if len(steps) > 0 || stopReason != "" {
		fmt.Fprintf(&b, "\n### Highest load sustained on one core (`taskset -c 0`, `GPUBUILD_CLOUDWATCH_MAX_RPS=0`, %v per step)\n\n", o.stepDuration)
		fmt.Fprintf(&b, "| load | sent points/s | sent spans/s | CPU (cores) | RSS peak (MiB) | refused | delivery exact | PutMetricData / bound |\n|---|---|---|---|---|---|---|---|\n")
		var best *result
		for _, r := range steps {
			e := r.sim.Exports
			fmt.Fprintf(&b, "| %v | %.0f | %.0f | %.3f | %.1f | %.0f | %s | %d / %d |\n", r.load, rate(e.MetricPoints.Items, r), rate(e.Spans.Items, r),
				r.cpuCores, r.peakMiB, r.refused, yesNo(r.exact()), r.requests, r.lowerBound)
		}
		for _, r := range steps {
			if r.exact() && r.refused == 0 && r.cpuCores <= 0.95 && r.sim.Elapsed <= o.stepDuration.Seconds()*1.1+5 {
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

// demo: buildsim -> the sidecar on its default config -> the CloudWatch test
// endpoint; prints the ground truth next to what landed.
func demo(ctx context.Context, o options) error {
	cw, err := cloudwatchtest.Start("127.0.0.1:0")
	if err != nil {
		return err
	}
	defer cw.Close()
	tmp, err := os.MkdirTemp("", "otelcol-gpubuild-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	st, err := sidecarTarget(o.root, cw, filepath.Join(tmp, "queue"), "GPUBUILD_FLUSH_INTERVAL=2s")
	if err != nil {
		return err
	}
	p, err := startProcess(st.argv, st.env, "")
	if err != nil {
		return err
	}
	defer func() {
		select {
		case <-p.done:
		default:
			p.kill()
		}
	}()
	if err := p.waitListening(st.grpcAddr, 60*time.Second); err != nil {
		return err
	}
	cfg := buildsim.DefaultConfig()
	cfg.Endpoint = st.grpcAddr
	cfg.Jobs, cfg.Rate = 200, 100
	logf("buildsim: %d jobs at %g/s over OTLP/gRPC to %s", cfg.Jobs, cfg.Rate, st.grpcAddr)
	s, err := buildsim.Run(ctx, cfg)
	if err != nil {
		return err
	}
	var want int64
	for _, n := range s.Generated.JobsByResult {
		want += n
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && landed(cw.Datums(), "build.jobs") < float64(want) {
		time.Sleep(200 * time.Millisecond)
	}
	if err := p.stop(30 * time.Second); err != nil {
		return err
	}
	datums := cw.Datums()
	fmt.Printf("CloudWatch test endpoint: %+v\n\n", cw.Stats())
	fmt.Printf("%-28s %-10s %-16s %-16s\n", "metric", "datums", "landed (sum)", "buildsim truth")
	truth := map[string]float64{"build.jobs": float64(want), buildsim.CounterName: float64(s.SDKMetrics.Counter.Total)}
	for _, series := range [][]buildsim.Series{s.Generated.StageRuns} {
		for _, x := range series {
			truth["build.stage.runs"] += float64(x.Count)
		}
	}
	for _, x := range s.Generated.APIRequests {
		truth["api.requests"] += float64(x.Count)
	}
	byName := map[string]int{}
	for _, d := range datums {
		byName[d.MetricName]++
	}
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		t := "–"
		if v, ok := truth[name]; ok {
			t = fmt.Sprintf("%.0f", v)
		}
		fmt.Printf("%-28s %-10d %-16.6g %-16s\n", name, byName[name], landed(datums, name), t)
	}
	fmt.Printf("\njobs by result (truth): %v\n", s.Generated.JobsByResult)
	return nil
}
