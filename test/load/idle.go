// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
)

// idleRun is what one idle run measured: CPU seconds per second over the
// window (from schedstat: an idle collector uses a few of stat's ticks),
// the timeslices its threads ran a second (each a wake-up), and the median
// VmRSS, RssAnon and RSS of the executable's pages over it, in MiB.
type idleRun struct{ cores, wakeups, total, anon, binary float64 }

// idleRunsOf starts every target at once (pinned to cpus), waits until each
// listens, lets them settle and measures each one's CPU and memory over
// the window that follows, the memory once a second. Idle collectors
// barely run, so side by side they do not disturb one another, and a long
// window (minutes: the timers of an idle process fire seconds apart) costs
// one window a round rather than one per build.
func idleRunsOf(targets []target, settle, window time.Duration, cpus string) ([]idleRun, error) {
	procs := make([]*binarytest.Process, 0, len(targets))
	defer func() {
		for _, p := range procs {
			p.Kill()
		}
	}()
	for _, t := range targets {
		p, err := startProcess(t.argv, t.env, cpus)
		if err != nil {
			return nil, err
		}
		procs = append(procs, p)
	}
	for i, t := range targets {
		if err := procs[i].AwaitListening(t.grpcAddr, 60*time.Second); err != nil {
			return nil, fmt.Errorf("%s: %w", t.name, err)
		}
	}
	time.Sleep(settle) // idle is a duration, not a condition
	first := make([]schedStat, len(procs))
	for i, p := range procs {
		s, err := readSchedStat(p.Pid())
		if err != nil {
			return nil, err
		}
		first[i] = s
	}
	start := time.Now()
	rss := make([][]float64, len(procs))
	anon := make([][]float64, len(procs))
	binary := make([][]float64, len(procs))
	for time.Since(start) < window {
		for i, p := range procs {
			if r, _, err := binarytest.MemKiB(p.Pid()); err == nil {
				rss[i] = append(rss[i], float64(r)/1024)
			}
			if a, err := binarytest.AnonKiB(p.Pid()); err == nil {
				anon[i] = append(anon[i], float64(a)/1024)
			}
			if b, _, err := fileRSS(p.Pid()); err == nil {
				binary[i] = append(binary[i], float64(b)/1024)
			}
		}
		time.Sleep(min(time.Second, window-time.Since(start)))
	}
	elapsed := time.Since(start).Seconds()
	runs := make([]idleRun, len(procs))
	for i, p := range procs {
		last, err := readSchedStat(p.Pid())
		if err != nil {
			return nil, err
		}
		runs[i] = idleRun{
			cores:   (last.seconds - first[i].seconds) / elapsed,
			wakeups: float64(last.timeslices-first[i].timeslices) / elapsed,
			total:   median(rss[i]), anon: median(anon[i]), binary: median(binary[i]),
		}
	}
	return runs, nil
}

// schedStat is the sum over a process's threads of
// /proc/<pid>/task/*/schedstat: CPU time (finer than stat's ticks, for an
// idle process that uses a few of them a minute) and timeslices run. A
// thread that exited is not counted.
type schedStat struct {
	seconds    float64
	timeslices uint64
}

func readSchedStat(pid int) (schedStat, error) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return schedStat{}, err
	}
	var ns, slices uint64
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
		if err != nil {
			continue // exited since the listing
		}
		f := strings.Fields(string(b))
		if len(f) < 3 {
			return schedStat{}, fmt.Errorf("malformed schedstat %q", b)
		}
		v, err1 := strconv.ParseUint(f[0], 10, 64)
		n, err2 := strconv.ParseUint(f[2], 10, 64)
		if err1 != nil || err2 != nil {
			return schedStat{}, fmt.Errorf("malformed schedstat %q", b)
		}
		ns += v
		slices += n
	}
	return schedStat{seconds: float64(ns) / 1e9, timeslices: slices}, nil
}
