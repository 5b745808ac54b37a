// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package binarytest holds what the tests of the built distribution share:
// where the checkout and the binary are, free loopback ports, and a buffer
// that collects a subprocess's output while a test reads it.
package binarytest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/resusage"
)

// RepoRoot is the checkout's root folder.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// Binary is the built distribution, bin/otelcol-gpubuild, or the one
// $OTELCOL_GPUBUILD_BIN names. The tests drive the binary an operator runs,
// so a missing binary fails the test rather than skipping it.
func Binary(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(RepoRoot(), "bin", "otelcol-gpubuild")
	if b := os.Getenv("OTELCOL_GPUBUILD_BIN"); b != "" {
		bin = b
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s not found: run `make build` first (`make test` builds it)", bin)
	}
	return bin
}

// EvictFromPageCache drops a binary's pages from the page cache, so that
// every build starts in the same state: read from disk as its pages are
// touched. A binary the linker has just written sits in the cache in large
// folios, which the kernel maps 2 MiB at a time, and then idles with nearly
// all of its file resident (measured with otelcol-gpubuild: 53.8 MiB VmRSS
// freshly built, 37.5 MiB read from disk), while a build from an earlier
// session is read page by page: without this, idle RSS compares the page
// cache's history, not the builds.
func EvictFromPageCache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	// Dirty pages are not dropped: write them first.
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		return fmt.Errorf("evicting %s from the page cache: %w", path, err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("evicting %s from the page cache: %w", path, err)
	}
	return nil
}

// Buffer collects a subprocess's output while a test reads it. With Keep
// set it holds only the last Keep bytes (long load runs).
type Buffer struct {
	Keep int

	mu  sync.Mutex
	buf []byte
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if b.Keep > 0 && len(b.buf) > 2*b.Keep {
		b.buf = append([]byte(nil), b.buf[len(b.buf)-b.Keep:]...)
	}
	return len(p), nil
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.Keep > 0 && len(b.buf) > b.Keep {
		return string(b.buf[len(b.buf)-b.Keep:])
	}
	return string(b.buf)
}

// MemKiB returns a process's resident set (VmRSS) and its peak (VmHWM), in KiB.
func MemKiB(pid int) (rss, peak int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	rss, peak = ParseStatusMem(string(b))
	return rss, peak, nil
}

// MemPeak is what SampleMem saw, in KiB: the largest VmRSS sampled and
// the last VmHWM read.
type MemPeak struct{ RSS, HWM int64 }

// SampleMem reads a process's memory every interval (a peak is sampled,
// and VmHWM stays readable only while the process lives); the returned
// function stops sampling and returns what it saw.
func SampleMem(pid int, every time.Duration) func() MemPeak {
	var rssKiB, hwmKiB atomic.Int64
	done := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		for {
			if rss, hwm, err := MemKiB(pid); err == nil {
				if rss > rssKiB.Load() {
					rssKiB.Store(rss)
				}
				if hwm > hwmKiB.Load() {
					hwmKiB.Store(hwm)
				}
			}
			select {
			case <-done:
				return
			case <-time.After(every):
			}
		}
	}()
	return func() MemPeak {
		close(done)
		sampler.Wait()
		return MemPeak{RSS: rssKiB.Load(), HWM: hwmKiB.Load()}
	}
}

// AnonKiB returns a process's anonymous resident memory (RssAnon), in KiB:
// the part of VmRSS that is not file pages (the binary, mapped files), which
// a memory cgroup cannot reclaim.
func AnonKiB(pid int) (int64, error) { return statusKiB(pid, "RssAnon:") }

// FileKiB returns a process's resident file pages (RssFile), in KiB: the
// binary's, shared libraries' and mapped files'.
func FileKiB(pid int) (int64, error) { return statusKiB(pid, "RssFile:") }

// LibraryKiB returns a process's resident pages of shared libraries (the
// mapped files with ".so" in their name), in KiB.
func LibraryKiB(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return 0, err
	}
	var kib int64
	for path, n := range resusage.FileRSSKiB(string(b)) {
		if strings.Contains(filepath.Base(path), ".so") {
			kib += n
		}
	}
	return kib, nil
}

func statusKiB(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return resusage.StatusKiB(string(b), field), nil
}

// ParseStatusMem reads VmRSS and VmHWM from the text of /proc/<pid>/status.
func ParseStatusMem(status string) (rss, peak int64) {
	return resusage.StatusKiB(status, "VmRSS:"), resusage.StatusKiB(status, "VmHWM:")
}

// EnvWithout is this process's environment less the variables whose
// "NAME=value" starts with one of prefixes, so that the runner's own AWS or
// collector settings never leak into the process under test.
func EnvWithout(prefixes ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(kv, p) }) {
			env = append(env, kv)
		}
	}
	return env
}
