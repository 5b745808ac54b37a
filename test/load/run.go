// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/gpubuild/otelcol-gpubuild/internal/runtimetuning"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/buildsim"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/promtext"
)

// settled is how long after its start a collector is measured at the
// soonest. Our binary gives its start's code back at
// runtimetuning.StartOver and reads again from disk, once, the code it
// runs next (about 0.2 CPU-seconds under the spans-only load); a window
// open then would charge that once-in-a-life cost to the load, at a rate
// that depends on how long the window is. Every build waits the same, and
// the row "CPU-seconds to the window" shows what each spent before it.
const settled = runtimetuning.StartOver + 10*time.Second

// run starts the target, sends the load, and measures it. cw is the
// CloudWatch test endpoint behind the sidecar (nil for the baseline).
// The load starts once the target listens, or later so that the window
// (warmup after the load starts) opens no sooner than settled after the
// target's start.
func run(ctx context.Context, t target, l load, warmup time.Duration, cw *cloudwatchtest.Server, cpus string) (*result, error) {
	if cw != nil {
		cw.Reset()
	}
	started := time.Now()
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
	time.Sleep(max(time.Second, settled-warmup-time.Since(started))) // let it settle after start

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
	res.startCPU = cpu0
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

// median is the middle value, or the mean of the two middle ones (two
// rounds: not the higher of them).
func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	sort.Float64s(s)
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}
