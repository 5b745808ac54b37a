// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package resusage reads what a process uses on Linux: resident memory
// from /proc/<pid>/status and /proc/<pid>/smaps, and CPU time from
// getrusage(2). The test harnesses, the GPU smoke test and cmd/nvmltiming
// measure with it.
package resusage // import "github.com/gpubuild/otelcol-gpubuild/internal/testing/resusage"

import (
	"strconv"
	"strings"
	"syscall"
	"time"
)

// StatusKiB reads a field such as "RssAnon:" from the text of
// /proc/<pid>/status, in KiB (0 when it is missing).
func StatusKiB(status, field string) int64 {
	for _, line := range strings.Split(status, "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			return v
		}
	}
	return 0
}

// FileRSSKiB sums the Rss of the mappings of each file in the text of
// /proc/<pid>/smaps, in KiB, by the file's path. Anonymous mappings
// ([heap], [stack], unnamed) are left out: RssAnon counts them.
func FileRSSKiB(smaps string) map[string]int64 {
	out := map[string]int64{}
	var path string
	for _, line := range strings.Split(smaps, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if strings.Contains(f[0], "-") && len(f) >= 5 { // a mapping's header: range perms offset dev inode [path]
			path = ""
			if len(f) >= 6 {
				path = strings.Join(f[5:], " ")
			}
			continue
		}
		if f[0] != "Rss:" || len(f) < 2 || !strings.HasPrefix(path, "/") {
			continue
		}
		kib, _ := strconv.ParseInt(f[1], 10, 64)
		out[path] += kib
	}
	return out
}

// getrusage(2) targets.
const (
	rusageSelf   = 0
	rusageThread = 1
)

// ProcessCPU is the user and system CPU time of this process so far.
func ProcessCPU() (time.Duration, error) { return cpu(rusageSelf) }

// ThreadCPU is the user and system CPU time of the calling thread so far;
// with the goroutine locked to its thread (runtime.LockOSThread) it holds
// the C calls made from it, and not their waits.
func ThreadCPU() (time.Duration, error) { return cpu(rusageThread) }

func cpu(who int) (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
