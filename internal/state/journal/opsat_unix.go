// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package journal

import (
	"os"
	"syscall"
)

// opsAt reads the operations of the journal's first size bytes from the
// file mapped into memory: a checkpoint reads them in the keys' order, not
// the file's, and a read call for each would take back much of what the
// order saves. Where the file cannot be mapped, through a window. done
// unmaps it.
func opsAt(f *os.File, size int64) (ops opReader, done func()) {
	var data []byte
	var mapErr error = syscall.EINVAL
	if rc, err := f.SyscallConn(); err == nil && size > 0 && int64(int(size)) == size {
		_ = rc.Control(func(fd uintptr) {
			data, mapErr = syscall.Mmap(int(fd), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
		})
	}
	if mapErr != nil {
		return newWindow(f, size), func() {}
	}
	return mappedOps(data), func() { _ = syscall.Munmap(data) }
}
