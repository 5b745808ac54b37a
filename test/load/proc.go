// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/resusage"
)

// clockTicks is USER_HZ, the unit of utime/stime in /proc/<pid>/stat; it is
// 100 on every Linux architecture the collector ships for.
const clockTicks = 100

// cpuSeconds is the user+system CPU time a process has used.
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(b))
}

// parseStatCPU reads utime and stime (fields 14 and 15) from a
// /proc/<pid>/stat line. The command name (field 2) is in parentheses and
// may contain spaces, so fields are counted after the last ')'.
func parseStatCPU(stat string) (float64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed stat %q", stat)
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state); utime is field 14 -> f[11], stime f[12].
	if len(f) < 13 {
		return 0, fmt.Errorf("malformed stat %q", stat)
	}
	u, err1 := strconv.ParseUint(f[11], 10, 64)
	s, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("malformed stat %q", stat)
	}
	return float64(u+s) / clockTicks, nil
}

// startProcess runs argv (optionally pinned to CPUs with taskset, which
// execs it: the pid stays the collector's) in its own process group.
func startProcess(argv []string, env []string, cpus string) (*binarytest.Process, error) {
	if err := binarytest.EvictFromPageCache(argv[0]); err != nil {
		return nil, err
	}
	if cpus != "" {
		argv = append([]string{"taskset", "-c", cpus}, argv...)
	}
	return binarytest.Start(argv, env, 16<<10)
}

// fileRSS splits a process's file-backed RSS, in KiB, into its
// executable's pages and every other file's (memory-mapped state such as
// bbolt's, shared libraries), from /proc/<pid>/smaps.
func fileRSS(pid int) (binaryKiB, otherKiB int64, err error) {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return 0, 0, err
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return 0, 0, err
	}
	binaryKiB, otherKiB = parseSmapsFileRSS(string(b), exe)
	return binaryKiB, otherKiB, nil
}

// parseSmapsFileRSS sums the Rss of the mappings of exe and of every
// other file in the text of /proc/<pid>/smaps. Anonymous mappings
// ([heap], [stack], unnamed) are left out: RssAnon counts them.
func parseSmapsFileRSS(smaps, exe string) (binaryKiB, otherKiB int64) {
	for path, kib := range resusage.FileRSSKiB(smaps) {
		if path == exe {
			binaryKiB += kib
		} else {
			otherKiB += kib
		}
	}
	return binaryKiB, otherKiB
}
