// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/gpubuild/otelcol-gpubuild/internal/runtimetuning"
)

// perSpanGoal is the CPU per span against contrib's that the spans-only
// rows are held to; idle CPU is held to contrib's (1×).
const perSpanGoal = 0.8

func peersReport(o options, cpus string, peers []peer, loads []peerLoad, idle map[string][]idleRun, runs map[string]map[string][]peerRun) string {
	var b strings.Builder
	fmt.Fprintf(&b, "### Side by side with the contrib assembly (`make bench-peers`)\n\n")
	fmt.Fprintf(&b, "Machine: %d CPUs (%s), %s, measured %s. ", runtime.NumCPU(), cpuModel(), runtime.Version(), time.Now().UTC().Format("2006-01-02"))
	var extra strings.Builder
	for _, kv := range o.sidecarEnv {
		fmt.Fprintf(&extra, " -sidecar-env %s", kv)
	}
	if o.only != "" {
		fmt.Fprintf(&extra, " -only %q", o.only)
	}
	if o.compare != "" {
		fmt.Fprintf(&extra, " -compare %s", o.compare)
	}
	if o.idleWindow != defaultIdleWindow {
		fmt.Fprintf(&extra, " -idle-window %v", o.idleWindow)
	}
	fmt.Fprintf(&b, "Command: `go run ./test/load -peers -rounds %d -duration %v -warmup %v%s`. ", o.rounds, o.duration, o.warmup, extra.String())
	fmt.Fprintf(&b, "Medians of %d rounds, the lowest and highest in brackets; in each round every load is run by every build in turn (A, B, C, A, B, C), ", o.rounds)
	if cpus != "" {
		fmt.Fprintf(&b, "each collector pinned to CPU %s (`taskset`). ", cpus)
	} else {
		fmt.Fprintf(&b, "the collectors not pinned. ")
	}
	fmt.Fprintf(&b, "A ratio is the median of the rounds' ratios (each round's builds ran minutes apart at most), with their range; \"within noise\" where that range reaches 1 or the goal (%.1f× contrib's CPU per span; contrib's idle CPU): another run may fall on either side. ", perSpanGoal)
	fmt.Fprintf(&b, "CPU = CPU seconds per second of the collector process over the window after the warmup, which opens %v after the collector's start at the soonest (the load starts later where needed: our binary gives its start's code back at %v and reads what it runs next again, a one-time cost the row \"CPU-seconds to the window\" includes) (idle: every build at once, side by side, over %v after %v to settle, from the threads' schedstat; wake-ups = the timeslices the threads ran); RSS = median VmRSS over that window, anonymous = median RssAnon (VmRSS less the file pages, which a memory cgroup can reclaim); the file pages are split into the binary's and every other file's (memory-mapped state such as bbolt's, shared libraries), from /proc/<pid>/smaps. Every binary's pages are dropped from the page cache before each start, so that each is read from disk as it runs (a binary just written by the linker is cached in large folios that the kernel maps 2 MiB at a time, which inflates its file RSS). ", settled, runtimetuning.StartOver, o.idleWindow, settled)
	fmt.Fprintf(&b, "otelcol-gpubuild runs its default `otelcol-config.yaml` against the CloudWatch test endpoint; the contrib assembly runs otlp → spanmetrics → awsemf against a local CloudWatch Logs endpoint; stock runs otlp → debug (basic); %s runs otelcol-gpubuild's binary on stock's configuration, at the spans-only loads only: what receiving costs our build, before it derives and persists; %s runs it on `otelcol-config.yaml` without its `state:` and `cumulative_state:` blocks (nothing persisted before a request is acknowledged), at the spans-only loads only. – = not measured.\n\n", receiveOnlyPeer, inMemoryPeer)

	if o.compare != "" {
		fmt.Fprintf(&b, "%s runs the build of the checkout given to -compare on that checkout's own `otelcol-config.yaml`, in the same rounds.\n\n", peers[len(peers)-1].name)
	}
	fmt.Fprintf(&b, "| figure |")
	for _, p := range peers {
		fmt.Fprintf(&b, " %s |", p.name)
	}
	fmt.Fprintf(&b, " ours / contrib |\n|---|")
	for range peers {
		fmt.Fprintf(&b, "---|")
	}
	fmt.Fprintf(&b, "---|\n")
	// row writes a figure's rounds for each peer, and ours against contrib's
	// round by round.
	row := func(name string, f func(p peer) []float64, format string, goal float64) {
		vals := make([][]float64, len(peers))
		measured := false
		for i, p := range peers {
			vals[i] = f(p)
			measured = measured || !math.IsNaN(spreadOf(vals[i]).med)
		}
		if !measured { // a load left out by -only
			return
		}
		fmt.Fprintf(&b, "| %s |", name)
		for _, v := range vals {
			s := spreadOf(v)
			if math.IsNaN(s.med) {
				fmt.Fprintf(&b, " – |")
				continue
			}
			fmt.Fprintf(&b, " %s |", s.format(format))
		}
		cell := ratioCell(pairedRatios(vals[0], vals[1]), goal)
		if c, ours := spreadOf(vals[1]), spreadOf(vals[0]); c.hi == 0 && ours.lo > 0 {
			cell = "above contrib's 0 in every round" // idle: contrib's threads may not run at all
		}
		fmt.Fprintf(&b, " %s |\n", cell)
	}
	row("binary (MB)", func(p peer) []float64 {
		st, err := os.Stat(p.bin)
		if err != nil {
			return nil
		}
		return []float64{float64(st.Size()) / 1e6}
	}, "%.1f", 0)
	idleOf := func(f func(idleRun) float64) func(p peer) []float64 {
		return func(p peer) []float64 {
			var v []float64
			for _, r := range idle[p.name] {
				v = append(v, f(r))
			}
			return v
		}
	}
	row("idle CPU (cores)", idleOf(func(r idleRun) float64 { return r.cores }), "%.5f", 1)
	row("idle wake-ups a second (timeslices run)", idleOf(func(r idleRun) float64 { return r.wakeups }), "%.2f", 1)
	row("idle RSS (MiB)", idleOf(func(r idleRun) float64 { return r.total }), "%.1f", 0)
	row("idle RSS, anonymous (MiB)", idleOf(func(r idleRun) float64 { return r.anon }), "%.1f", 0)
	row("idle RSS, the binary's pages (MiB)", idleOf(func(r idleRun) float64 { return r.binary }), "%.1f", 0)
	figures := []struct {
		label, format string
		of            func(peerRun) float64
	}{
		{"CPU (cores)", "%.3f", func(r peerRun) float64 { return r.cores }},
		{"RSS (MiB)", "%.1f", func(r peerRun) float64 { return r.rssMiB }},
		{"RSS, anonymous (MiB)", "%.1f", func(r peerRun) float64 { return r.anonMiB }},
		{"RSS, the binary's pages (MiB)", "%.1f", func(r peerRun) float64 { return r.binaryMiB }},
		{"RSS, other files: mapped state, libraries (MiB)", "%.1f", func(r peerRun) float64 { return r.otherFileMiB }},
		{"CPU-seconds to the window (start, settling, warmup)", "%.2f", func(r peerRun) float64 { return r.startCPU }},
	}
	for _, pl := range loads {
		for _, f := range figures {
			row(pl.name+": "+f.label, func(p peer) []float64 { return valuesOf(runs[p.name][pl.name], f.of) }, f.format, 0)
		}
	}
	// Per-signal costs from the single-signal loads: CPU seconds per million
	// items sent, and items per second one core would carry at that cost.
	pointsLoad, spansLoad, denseSpansLoad := loads[3].name, loads[4].name, loads[5].name
	perMillion := func(load string, items func(peerRun) float64) func(p peer) []float64 {
		return func(p peer) []float64 {
			return valuesOf(runs[p.name][load], func(r peerRun) float64 {
				if items(r) == 0 {
					return math.NaN()
				}
				return r.cores * r.seconds / items(r) * 1e6
			})
		}
	}
	points := func(r peerRun) float64 { return r.points }
	spans := func(r peerRun) float64 { return r.spans }
	row("CPU-seconds per 1M points", perMillion(pointsLoad, points), "%.1f", 0)
	row("CPU-seconds per 1M spans", perMillion(spansLoad, spans), "%.1f", perSpanGoal)
	row("CPU-seconds per 1M spans at 20k spans/s", perMillion(denseSpansLoad, spans), "%.1f", perSpanGoal)
	// Each build's per-span cost against contrib's, round by round: the cost
	// of the guarantee is ours against ours with the state in memory.
	toContrib := func(of func(p peer) []float64) func(p peer) []float64 {
		return func(p peer) []float64 { return pairedRatios(of(p), of(peers[1])) }
	}
	row("CPU per 1M spans, to contrib's", toContrib(perMillion(spansLoad, spans)), "%.2f×", 0)
	row("CPU per 1M spans at 20k spans/s, to contrib's", toContrib(perMillion(denseSpansLoad, spans)), "%.2f×", 0)
	row("spans/s per core (at the 2000 spans/s cost)", func(p peer) []float64 {
		v := perMillion(spansLoad, spans)(p)
		for i := range v {
			v[i] = 1e6 / v[i]
		}
		return v
	}, "%.0f", 0)
	fmt.Fprintf(&b, "\nThe load generator and the endpoints run in the harness process on the same machine; the spans-only load also carries the job status log records and the SDK's few job series.\n")
	for _, p := range peers {
		if line := deliveryLine(p.name, loads, runs[p.name]); line != "" {
			b.WriteString(line)
		}
	}
	return b.String()
}

// valuesOf is f of each run, in round order.
func valuesOf(rs []peerRun, f func(peerRun) float64) []float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	return v
}
