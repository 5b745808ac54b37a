// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package exepages gives back the pages of the executable, and of the
// shared libraries it was linked with, that starting the process read and
// running it does not touch.
//
// The kernel reads an executable ahead of what runs: each page fault in a
// cold region reads up to the device's read-ahead window (4 MiB on some
// cloud volumes) into the page cache, and maps up to 64 KiB of cached
// pages around the fault. Starting a collector runs code spread over the
// whole binary once (package initialisers, configuration decoding, every
// factory), so most of the binary ends up cached and mapped, and stays in
// the process's RSS and its memory cgroup's charge, while the steady state
// runs a fraction of it. Release, called once the start is over, tells the
// kernel to read the executable one page at a time from then on
// (MADV_RANDOM), unmaps its pages from the process (MADV_DONTNEED) and
// drops the file's cached pages that no process maps any more
// (POSIX_FADV_DONTNEED). The pages the process goes on running fault back
// in one at a time: idle, the binary's resident pages fall from 35 to
// 7.5 MiB.
//
// MADV_DONTNEED on a private file mapping would also discard the
// process's own copies of pages it wrote there (the dynamic loader's
// relocations, a debugger's breakpoints): only read-only mappings that
// smaps shows to hold no such copy, in memory or swapped out, are
// advised. Pages another process still maps (a second collector started
// from the same image on the node) stay cached for it.
//
// The libraries the executable was linked with (cgo's libc and the
// dynamic loader: about 1.4 MiB resident after the start, of which a
// sidecar runs almost nothing once its threads are made) are unmapped the
// same way, but left in the page cache, which every process on the node
// shares. Only the libraries mapped before the collector starts are
// advised (Libraries): those are never unloaded, so their addresses stay
// theirs, whereas a library opened later (NVML) may be closed and its
// addresses given to other memory between the reading of smaps and the
// advice.
package exepages // import "github.com/gpubuild/otelcol-gpubuild/internal/runtimetuning/exepages"

import (
	"slices"
	"strconv"
	"strings"
)

// mapping is one mapping of /proc/<pid>/smaps (or maps).
type mapping struct {
	start, end uintptr
	perms      string
	// file says which file the mapping maps: device, inode and path as
	// the kernel prints them (equal for all mappings of one file).
	file string
	// noFile: an anonymous mapping (inode 0).
	noFile bool
	// privateKiB is smaps' "Anonymous" plus "Swap": pages of the mapping
	// that are the process's own copies, not the file's, in memory or
	// swapped out. privateKnown: smaps listed "Anonymous" for it.
	privateKiB   int64
	privateKnown bool
}

// parseSmaps reads the mappings of /proc/<pid>/smaps; lines it cannot
// read are skipped.
func parseSmaps(text string) []mapping {
	var out []mapping
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		if len(f) == 3 && (f[0] == "Anonymous:" || f[0] == "Swap:") && len(out) > 0 {
			kib, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				kib = 1 // unreadable: counted as holding copies
			}
			m := &out[len(out)-1]
			m.privateKiB += int64(kib)
			m.privateKnown = m.privateKnown || f[0] == "Anonymous:"
			continue
		}
		if len(f) < 5 {
			continue
		}
		from, to, ok := strings.Cut(f[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(from, 16, 64)
		end, err2 := strconv.ParseUint(to, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		// dev, inode, then the path (which may hold spaces).
		file := f[3] + " " + f[4]
		if len(f) > 5 {
			file += " " + strings.Join(f[5:], " ")
		}
		out = append(out, mapping{start: uintptr(start), end: uintptr(end), perms: f[1], file: file, noFile: f[4] == "0"})
	}
	return out
}

// sharedLibraries returns the files of the shared objects in maps (their
// name has ".so" in it), each once, as mapping.file names them.
func sharedLibraries(maps []mapping) []string {
	var out []string
	for _, m := range maps {
		if !m.noFile && strings.Contains(m.file[strings.LastIndexByte(m.file, '/')+1:], ".so") && !slices.Contains(out, m.file) {
			out = append(out, m.file)
		}
	}
	return out
}

// cleanReadOnlyMappingsOf returns the mappings of files that are
// read-only and known to hold none of the process's own copies of pages.
func cleanReadOnlyMappingsOf(maps []mapping, files []string) []mapping {
	var out []mapping
	for _, m := range maps {
		if slices.Contains(files, m.file) && !strings.Contains(m.perms, "w") && m.privateKnown && m.privateKiB == 0 {
			out = append(out, m)
		}
	}
	return out
}

// cleanReadOnlyMappingsOfFileAt returns the mappings of the file mapped at
// addr that are read-only and known to hold none of the process's own
// copies of pages: those whose pages can be unmapped and read again from
// the file without losing anything. None when addr is in no file mapping.
func cleanReadOnlyMappingsOfFileAt(maps []mapping, addr uintptr) []mapping {
	var file string
	for _, m := range maps {
		if addr >= m.start && addr < m.end && !m.noFile {
			file = m.file
			break
		}
	}
	if file == "" {
		return nil
	}
	return cleanReadOnlyMappingsOf(maps, []string{file})
}
