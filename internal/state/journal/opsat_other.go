// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !unix

package journal

import "os"

// opsAt reads the operations of the journal's first size bytes through a
// window.
func opsAt(f *os.File, size int64) (ops opReader, done func()) {
	return newWindow(f, size), func() {}
}
