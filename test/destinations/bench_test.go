// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package destinations

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
)

// cpuSeconds is a process's user+system CPU time from /proc/<pid>/stat.
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name, which is in parentheses.
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, err := strconv.ParseFloat(fields[11], 64)
	if err != nil {
		return 0, err
	}
	stime, err := strconv.ParseFloat(fields[12], 64)
	if err != nil {
		return 0, err
	}
	return (utime + stime) / 100, nil // USER_HZ is 100 on Linux
}

// BenchmarkDestinations runs the same buildsim workload through the sidecar
// with cloudwatch alone and with all five destinations, and reports the
// collector's CPU seconds per workload and its peak RSS: the cost of the
// four extra destinations is the difference between the two.
//
//	go test -run '^$' -bench Destinations -benchtime 3x ./test/destinations/
func BenchmarkDestinations(b *testing.B) {
	for _, set := range []string{"cloudwatch", allDestinations} {
		name := "one"
		if set == allDestinations {
			name = "all-five"
		}
		b.Run(name, func(b *testing.B) {
			s := startStores(b)
			p := newCollectorPorts(b)
			env := s.env(p, b.TempDir())
			env = append(env, "GPUBUILD_DESTINATIONS="+set) // the last value wins
			c := startCollector(b, p, env)
			pid := c.Pid()
			start, err := cpuSeconds(pid)
			if err != nil {
				b.Fatal(err)
			}
			// Every store sums over all services, so the expected totals
			// add up the workloads run so far.
			want := totals{}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				cfg := simConfig(p, fmt.Sprintf("bench-%d", i), int64(100+i))
				cfg.Jobs = 200
				cfg.Rate = 40
				for k, v := range truthTotals(runSim(b, cfg)) {
					want[k] += v
				}
				// A workload ends when every store holds it.
				awaitExact(b, s, want, strings.Split(set, ","), 3*time.Minute)
			}
			b.StopTimer()
			end, err := cpuSeconds(pid)
			if err != nil {
				b.Fatal(err)
			}
			_, peak, err := binarytest.MemKiB(pid)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric((end-start)/float64(b.N), "cpu-s/workload")
			b.ReportMetric(float64(peak)/1024, "peak-rss-MiB")
		})
	}
}
