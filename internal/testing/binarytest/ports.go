// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package binarytest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago and
// that no other test process will hand out (PickFreePorts).
func FreePort(t testing.TB) int {
	t.Helper()
	return FreePorts(t, 1)[0]
}

// FreePorts returns n distinct TCP ports on 127.0.0.1 (PickFreePorts),
// failing the test when there are none.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	ports, err := PickFreePorts(n)
	require.NoError(t, err)
	return ports
}

// PickFreePorts returns n TCP ports on 127.0.0.1 that were free a moment
// ago. Each is this process's until it exits: no other test process (go
// test runs packages side by side) and no later call here hands it out
// again, so a collector that keeps its ports across a restart finds them
// free while it was down. They are taken below the kernel's ephemeral range
// (where it picks the local port of every outgoing connection), so that no
// client connection takes one either.
func PickFreePorts(n int) ([]int, error) {
	lo, hi := portsBelowEphemeral()
	return processPorts.pick(n, lo, hi)
}

// processPorts are the ports this process has handed out. Process-wide by
// nature: the claims they hold are released when the process exits.
var processPorts = portClaims{dir: filepath.Join(os.TempDir(), "otelcol-gpubuild-test-ports")}

// portClaims hands out ports, each claimed by an exclusive lock on a file
// named after it in dir: the lock belongs to the open file, which this
// process keeps open (close-on-exec, so the collectors it starts do not
// hold it), so it lasts as long as the process and no longer, even after
// kill -9.
type portClaims struct {
	dir  string
	mu   sync.Mutex
	held map[int]*os.File
}

// pick returns n ports from lo-hi that are claimed here and free to listen
// on; with an empty range (lo > hi) the kernel picks them.
func (c *portClaims) pick(n, lo, hi int) ([]int, error) {
	ports := make([]int, n)
	for i := range ports {
		for attempt := 0; ports[i] == 0; attempt++ {
			if attempt == 1000 {
				return nil, fmt.Errorf("no free port in %d-%d", lo, hi)
			}
			addr := "127.0.0.1:0"
			if hi >= lo {
				// Claimed before the probe: a probe of a port another
				// process holds for a stopped collector could take it
				// from under that collector's restart.
				p := lo + rand.IntN(hi-lo+1)
				ok, err := c.claim(p)
				if err != nil {
					return nil, err
				}
				if !ok {
					continue // another process's, or handed out before
				}
				addr = fmt.Sprintf("127.0.0.1:%d", p)
			}
			l, err := net.Listen("tcp", addr)
			if err != nil {
				continue // in use by something that does not claim: try another
			}
			ports[i] = l.Addr().(*net.TCPAddr).Port
			_ = l.Close()
			if hi < lo {
				ok, err := c.claim(ports[i])
				if err != nil {
					return nil, err
				}
				if !ok {
					ports[i] = 0 // the kernel gave one out twice
				}
			}
		}
	}
	return ports, nil
}

// claim makes port this process's: false when another process holds it or
// this one handed it out before.
func (c *portClaims) claim(port int) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.held[port]; ok {
		return false, nil
	}
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return false, fmt.Errorf("port claims: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(c.dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return false, fmt.Errorf("port claims: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return false, nil
		}
		return false, fmt.Errorf("port claims: locking %s: %w", f.Name(), err)
	}
	if c.held == nil {
		c.held = map[int]*os.File{}
	}
	c.held[port] = f
	return true, nil
}

// portsBelowEphemeral is the range FreePorts takes ports from: from 20000
// to just below the ephemeral range (/proc/sys/net/ipv4/ip_local_port_range,
// 32768-60999 by default); an empty range (lo > hi) where that file is
// missing or the range starts too low, and then the kernel picks.
func portsBelowEphemeral() (lo, hi int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 1, 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 1, 0
	}
	first, err := strconv.Atoi(f[0])
	if err != nil {
		return 1, 0
	}
	return 20000, first - 1
}
