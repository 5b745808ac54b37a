// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package exepages

import (
	"fmt"
	"os"
	"reflect"

	"golang.org/x/sys/unix"
)

// Libraries names the shared libraries mapped now. Called before the
// collector starts, they are the ones the executable was linked with (see
// the package comment), to be passed to Release.
func Libraries() ([]string, error) {
	text, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return nil, err
	}
	return sharedLibraries(parseSmaps(string(text))), nil
}

// Release gives back the pages of this process's executable and of
// libraries, which Libraries named (see the package comment). It is meant
// to be called once, after the start.
func Release(libraries []string) error {
	exe, err := os.Open("/proc/self/exe") // the running binary, even if replaced on disk since
	if err != nil {
		return err
	}
	defer func() { _ = exe.Close() }()
	return release(reflect.ValueOf(Release).Pointer(), exe, libraries)
}

// release unmaps the clean read-only mappings of the file mapped at addr,
// drops the cached pages of f, that file, that no process maps, and then
// unmaps those of libraries: advice a library's mapping refuses leaves
// the executable's release done.
func release(addr uintptr, f *os.File, libraries []string) error {
	text, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return err
	}
	all := parseSmaps(string(text))
	maps := cleanReadOnlyMappingsOfFileAt(all, addr)
	if len(maps) == 0 {
		return fmt.Errorf("no clean read-only mapping of a file at %#x", addr)
	}
	for _, m := range maps {
		// The addresses come from the kernel's own list of this process's
		// mappings; no Go memory is reinterpreted.
		if err := madvise(m, unix.MADV_RANDOM); err != nil {
			return err
		}
		if err := madvise(m, unix.MADV_DONTNEED); err != nil {
			return err
		}
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return err
	}
	// The libraries' pages stay cached: other processes run them too.
	for _, m := range cleanReadOnlyMappingsOf(all, libraries) {
		if err := madvise(m, unix.MADV_DONTNEED); err != nil {
			return err
		}
	}
	return nil
}

func madvise(m mapping, advice int) error {
	if _, _, errno := unix.Syscall(unix.SYS_MADVISE, m.start, m.end-m.start, uintptr(advice)); errno != 0 {
		return fmt.Errorf("madvise %#x-%#x (%s): %w", m.start, m.end, adviceName(advice), errno)
	}
	return nil
}

func adviceName(advice int) string {
	switch advice {
	case unix.MADV_RANDOM:
		return "MADV_RANDOM"
	case unix.MADV_DONTNEED:
		return "MADV_DONTNEED"
	}
	return fmt.Sprint(advice)
}
