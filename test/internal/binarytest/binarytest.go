// Package binarytest holds what the tests of the built distribution share:
// where the checkout and the binary are, free loopback ports, and a buffer
// that collects a subprocess's output while a test reads it.
package binarytest

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
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

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Buffer collects a subprocess's output while a test reads it.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
