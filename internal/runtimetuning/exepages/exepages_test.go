// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package exepages

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A cgo-linked Go binary as /proc/self/smaps lists it (most per-mapping
// fields left out), with the page the dynamic loader relocated (a private
// copy in a read-only mapping), the heap, an anonymous region, a shared
// library and a file whose path has spaces.
const goProcessSmaps = `00400000-00410000 r--p 00000000 fe:00 11174924                           /usr/local/bin/otelcol-gpubuild
Rss:                  64 kB
Anonymous:             0 kB
00410000-0187f000 r-xp 00010000 fe:00 11174924                           /usr/local/bin/otelcol-gpubuild
Rss:               20480 kB
Anonymous:             0 kB
VmFlags: rd ex mr mw me
0187f000-03031000 r--p 0147f000 fe:00 11174924                           /usr/local/bin/otelcol-gpubuild
Anonymous:             0 kB
Swap:                  0 kB
SwapPss:               0 kB
03031000-03032000 r--p 02c31000 fe:00 11174924                           /usr/local/bin/otelcol-gpubuild
Anonymous:             4 kB
03032000-030f3000 rw-p 02c32000 fe:00 11174924                           /usr/local/bin/otelcol-gpubuild
Anonymous:           180 kB
030f3000-03140000 rw-p 00000000 00:00 0 
Anonymous:           300 kB
0a5d1000-0a5f2000 rw-p 00000000 00:00 0                                  [heap]
c000000000-c004000000 rw-p 00000000 00:00 0 
7f1c2a000000-7f1c2a020000 r--p 00000000 fe:00 2097300                    /usr/lib/x86_64-linux-gnu/libc.so.6
Anonymous:             0 kB
7f1c2a020000-7f1c2a021000 r--p 00020000 fe:00 2097300                    /usr/lib/x86_64-linux-gnu/libc.so.6
Anonymous:             0 kB
Swap:                  4 kB
7f1c2a028000-7f1c2a1bd000 r-xp 00028000 fe:00 2097300                    /usr/lib/x86_64-linux-gnu/libc.so.6
Anonymous:             0 kB
7f1c2b000000-7f1c2b800000 r--s 00000000 fe:00 3000001                    /var/lib/otelcol gpubuild/queue/exporter_cloudwatch
7ffd3c5e0000-7ffd3c601000 rw-p 00000000 00:00 0                          [stack]
not a mapping line
`

func TestParseSmaps(t *testing.T) {
	maps := parseSmaps(goProcessSmaps)
	assert.Len(t, maps, 13, "every mapping, the unreadable line skipped")
	assert.Equal(t, mapping{start: 0x410000, end: 0x187f000, perms: "r-xp", file: "fe:00 11174924 /usr/local/bin/otelcol-gpubuild", privateKnown: true}, maps[1])
	assert.Equal(t, int64(4), maps[3].privateKiB, "the relocated page")
	assert.Equal(t, int64(4), maps[9].privateKiB, "a swapped-out copy")
	assert.Equal(t, "fe:00 3000001 /var/lib/otelcol gpubuild/queue/exporter_cloudwatch", maps[11].file, "a path with a space")
	assert.True(t, maps[5].noFile)
	assert.True(t, maps[6].noFile, "[heap] maps no file")
}

func TestCleanReadOnlyMappingsOfTheFileAtAnAddress(t *testing.T) {
	maps := parseSmaps(goProcessSmaps)
	got := cleanReadOnlyMappingsOfFileAt(maps, 0x1000000) // in the text
	var starts []uintptr
	for _, m := range got {
		starts = append(starts, m.start)
	}
	assert.Equal(t, []uintptr{0x400000, 0x410000, 0x187f000}, starts,
		"the executable's read-only mappings; not the relocated page, not its data (rw), not libc's")

	assert.Len(t, cleanReadOnlyMappingsOfFileAt(maps, 0x7f1c2a030000), 2,
		"libc's two clean ones (not the one with a swapped-out copy), from an address in its text")
	assert.Empty(t, cleanReadOnlyMappingsOfFileAt(maps, 0xc000001000), "an anonymous region is no file")
	assert.Empty(t, cleanReadOnlyMappingsOfFileAt(maps, 0x1000), "no mapping there")
}

func TestUnknownPrivateSizeCountsAsCopies(t *testing.T) {
	unreadable := parseSmaps("00400000-00410000 r--p 00000000 fe:00 7 /bin/x\nAnonymous: ? kB\n")
	assert.Empty(t, cleanReadOnlyMappingsOfFileAt(unreadable, 0x400000), "Anonymous unreadable")
	missing := parseSmaps("00400000-00410000 r--p 00000000 fe:00 7 /bin/x\nSwap: 0 kB\n")
	assert.Empty(t, cleanReadOnlyMappingsOfFileAt(missing, 0x400000), "no Anonymous field (maps, not smaps)")
}

func TestSharedLibrariesAreTheSharedObjectsMapped(t *testing.T) {
	maps := parseSmaps(goProcessSmaps)
	libc := "fe:00 2097300 /usr/lib/x86_64-linux-gnu/libc.so.6"
	assert.Equal(t, []string{libc}, sharedLibraries(maps),
		"libc once; not the executable, the queue's file or anonymous memory")
	var starts []uintptr
	for _, m := range cleanReadOnlyMappingsOf(maps, []string{libc}) {
		starts = append(starts, m.start)
	}
	assert.Equal(t, []uintptr{0x7f1c2a000000, 0x7f1c2a028000}, starts,
		"libc's clean read-only mappings, not the one with a swapped-out copy")
	assert.Empty(t, cleanReadOnlyMappingsOf(maps, nil))
	assert.Empty(t, sharedLibraries(parseSmaps("00400000-00410000 r--p 00000000 fe:00 7 /opt/x.so.d/bin/otelcol\n")),
		"\".so\" in a directory's name only")
}
