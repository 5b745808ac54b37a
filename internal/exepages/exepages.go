// Package exepages gives back the pages of the executable that starting
// the process read and running it does not touch.
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
// (MADV_RANDOM), reclaims the pages mapped now (MADV_PAGEOUT; clean file
// pages are dropped, never written) and drops the file's other cached
// pages (POSIX_FADV_DONTNEED). The pages the process goes on running fault
// back in one at a time (BENCHMARKS.md, "The start's code given back").
//
// The kernel reclaims a file's mapped pages only for a process that owns
// the file or may write it (a page of a file it could not write could be
// someone else's); otherwise only the unmapped cached pages are dropped.
// Pages another process maps are left alone.
package exepages // import "github.com/gpubuild/otelcol-gpubuild/internal/exepages"

import (
	"strconv"
	"strings"
)

// mapping is one line of /proc/<pid>/maps.
type mapping struct {
	start, end uintptr
	perms      string
	// file says which file the mapping maps: device, inode and path as
	// the kernel prints them (equal for all mappings of one file).
	file string
	// anonymous: no file (inode 0).
	anonymous bool
}

// parseMaps reads the lines of /proc/<pid>/maps; lines it cannot read are
// skipped.
func parseMaps(text string) []mapping {
	var out []mapping
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
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
		out = append(out, mapping{start: uintptr(start), end: uintptr(end), perms: f[1], file: file, anonymous: f[4] == "0"})
	}
	return out
}

// readOnlyMappingsOfFileAt returns the read-only mappings of the file
// mapped at addr (none when addr is in no mapping or in an anonymous one).
// Writable mappings are left out: they hold the process's own copies of
// the file's data.
func readOnlyMappingsOfFileAt(maps []mapping, addr uintptr) []mapping {
	var file string
	for _, m := range maps {
		if addr >= m.start && addr < m.end && !m.anonymous {
			file = m.file
			break
		}
	}
	if file == "" {
		return nil
	}
	var out []mapping
	for _, m := range maps {
		if m.file == file && !strings.Contains(m.perms, "w") {
			out = append(out, m)
		}
	}
	return out
}
