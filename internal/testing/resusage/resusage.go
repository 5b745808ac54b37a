// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package resusage reads what a process uses on Linux: resident memory
// from /proc/<pid>/status and CPU time from getrusage(2). The test
// harnesses, the GPU smoke test and cmd/nvmltiming measure with it.
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
