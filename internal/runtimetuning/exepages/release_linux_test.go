// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package exepages

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/resusage"
)

// residentPages counts the pages of b that are in memory.
func residentPages(t *testing.T, b []byte) int {
	t.Helper()
	vec := make([]byte, (len(b)+os.Getpagesize()-1)/os.Getpagesize())
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0])))
	require.Zero(t, errno, "mincore: %v", errno)
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

// mapFile writes pages of distinct content to a new file, syncs it (so its
// cached pages are clean) and maps it read-only, every page touched.
func mapFile(t *testing.T, name string, pages int) (*os.File, []byte, []byte) {
	t.Helper()
	content := make([]byte, pages*os.Getpagesize())
	for i := range content {
		content[i] = byte(i / os.Getpagesize())
	}
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, content, 0o600))
	f, err := os.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	require.NoError(t, f.Sync())
	b, err := unix.Mmap(int(f.Fd()), 0, len(content), unix.PROT_READ, unix.MAP_PRIVATE)
	require.NoError(t, err)
	t.Cleanup(func() { _ = unix.Munmap(b) })
	sum := 0
	for i := 0; i < len(b); i += os.Getpagesize() {
		sum += int(b[i])
	}
	require.Equal(t, pages*(pages-1)/2, sum)
	return f, b, content
}

// The mapped file's pages leave memory; what is read afterwards is the
// file's content, read back; another file's pages stay.
func TestReleaseDropsTheFilesPagesAndKeepsItsContent(t *testing.T) {
	const pages = 256
	f, mapped, content := mapFile(t, "exe", pages)
	_, other, _ := mapFile(t, "other", 16)
	require.Equal(t, pages, residentPages(t, mapped))
	require.Equal(t, 16, residentPages(t, other))

	require.NoError(t, release(uintptr(unsafe.Pointer(&mapped[0])), f, nil))

	assert.Zero(t, residentPages(t, mapped), "pages of the released file still in memory")
	assert.Equal(t, 16, residentPages(t, other), "another file's pages were dropped")
	assert.True(t, bytes.Equal(content, mapped), "the content read back differs")
	assert.Equal(t, pages, residentPages(t, mapped), "read back, every page is in memory again")
}

// A private mapping holds the process's own copies of the pages it wrote:
// release leaves a writable one alone, and a read-only one that holds such
// a copy (as the page the dynamic loader relocates, then protects).
func TestReleaseKeepsPrivateCopies(t *testing.T) {
	f, mapped, _ := mapFile(t, "exe", 8)
	privateMapping := func() []byte {
		b, err := unix.Mmap(int(f.Fd()), 0, 8*os.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE)
		require.NoError(t, err)
		t.Cleanup(func() { _ = unix.Munmap(b) })
		b[0] = 0xAB
		return b
	}
	rw := privateMapping()
	relocated := privateMapping()
	require.NoError(t, unix.Mprotect(relocated, unix.PROT_READ))

	require.NoError(t, release(uintptr(unsafe.Pointer(&mapped[0])), f, nil))

	assert.Equal(t, byte(0xAB), rw[0], "the writable mapping's copy was lost")
	assert.Equal(t, byte(0xAB), relocated[0], "the read-only mapping's copy was lost")
	assert.Equal(t, byte(0), mapped[0])
	assert.Zero(t, residentPages(t, mapped[os.Getpagesize():]), "the clean mapping's pages still in memory")
}

func TestReleaseOfThisTestBinary(t *testing.T) {
	require.NoError(t, Release(nil))
}

func TestReleaseRefusesAnAddressOutsideAFile(t *testing.T) {
	f, _, _ := mapFile(t, "exe", 1)
	heap := make([]byte, 1<<20)
	assert.ErrorContains(t, release(uintptr(unsafe.Pointer(&heap[0])), f, nil), "no clean read-only mapping of a file")
}

// The libraries named before the collector starts are unmapped with the
// executable and read back are the file's content; a library mapped
// afterwards stays mapped; neither library's pages leave the page cache.
func TestReleaseGivesBackTheLibrariesMappedAtTheStart(t *testing.T) {
	exe, exeMapped, _ := mapFile(t, "otelcol", 4)
	startFile, atStart, atStartContent := mapFile(t, "libatstart.so.1", 64)
	libraries, err := Libraries()
	require.NoError(t, err)
	require.Contains(t, libraries, libraryOf(t, startFile), "the library mapped before is named")
	laterFile, later, _ := mapFile(t, "liblater.so", 16)
	page := int64(os.Getpagesize() / 1024)
	require.Equal(t, 64*page, mappedKiB(t, startFile))

	require.NoError(t, release(uintptr(unsafe.Pointer(&exeMapped[0])), exe, libraries))

	assert.Zero(t, mappedKiB(t, startFile), "the library named at the start is still mapped")
	assert.Equal(t, 16*page, mappedKiB(t, laterFile), "a library mapped later was unmapped")
	assert.Equal(t, 64, residentPages(t, atStart), "the library's pages left the page cache")
	assert.Equal(t, 16, residentPages(t, later), "the later library's pages left the page cache")
	assert.True(t, bytes.Equal(atStartContent, atStart), "the content read back differs")
	assert.Equal(t, 64*page, mappedKiB(t, startFile), "read back, every page is mapped again")
}

// libraryOf is f as Libraries and smaps name it: device, inode and path.
func libraryOf(t *testing.T, f *os.File) string {
	t.Helper()
	var st unix.Stat_t
	require.NoError(t, unix.Fstat(int(f.Fd()), &st))
	return fmt.Sprintf("%02x:%02x %d %s", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino, kernelPath(t, f))
}

// kernelPath is f's path as the kernel names it in /proc/self/maps.
func kernelPath(t *testing.T, f *os.File) string {
	t.Helper()
	path, err := filepath.EvalSymlinks(f.Name())
	require.NoError(t, err)
	return path
}

// mappedKiB is the memory of this process that maps f (smaps' Rss of its
// mappings), unlike residentPages, which for a file also counts the pages
// in the page cache that the process does not map.
func mappedKiB(t *testing.T, f *os.File) int64 {
	t.Helper()
	text, err := os.ReadFile("/proc/self/smaps")
	require.NoError(t, err)
	return resusage.FileRSSKiB(string(text))[kernelPath(t, f)]
}
