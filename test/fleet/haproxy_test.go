// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
)

// loadBalancer is HAProxy in TCP mode in front of gateway slots, as a
// Kubernetes Service is: each new connection goes to a random backend whose
// health check (the gateway's health_check endpoint, a readiness probe)
// passes. A slot is a pair of ports a gateway may listen on; a slot with
// nothing on it is down.
type loadBalancer struct {
	port int
	proc *binarytest.Process
}

// slot is where one gateway process can listen.
type slot struct{ grpc, health int }

func newSlots(t *testing.T, n int) []slot {
	out := make([]slot, n)
	for i := range out {
		out[i] = slot{binarytest.FreePort(t), binarytest.FreePort(t)}
	}
	return out
}

// onSlot sets a gateway node's listeners to slot s.
func (n *node) onSlot(s slot) { n.grpc, n.health = s.grpc, s.health }

func startHAProxy(t *testing.T, slots []slot) *loadBalancer {
	t.Helper()
	bin, err := exec.LookPath("haproxy")
	require.NoError(t, err, "haproxy is installed by make deps")
	lb := &loadBalancer{port: binarytest.FreePort(t)}
	var b strings.Builder
	fmt.Fprintf(&b, `global
  maxconn 2000
defaults
  mode tcp
  timeout connect 2s
  timeout client 10m
  timeout server 10m
frontend otlp
  bind 127.0.0.1:%d
  default_backend gateways
backend gateways
  balance random
  option httpchk GET /
`, lb.port)
	for i, s := range slots {
		fmt.Fprintf(&b, "  server g%d 127.0.0.1:%d check port %d inter 300 fall 1 rise 1\n", i, s.grpc, s.health)
	}
	cfg := filepath.Join(t.TempDir(), "haproxy.cfg")
	require.NoError(t, os.WriteFile(cfg, []byte(b.String()), 0o600))
	lb.proc, err = binarytest.Start([]string{bin, "-f", cfg, "-db"}, os.Environ(), 1<<16)
	require.NoError(t, err)
	t.Cleanup(func() { lb.proc.Kill() })
	require.NoError(t, lb.proc.AwaitListening(lb.endpoint(), 10*time.Second), "haproxy: %s", lb.proc.Output.String())
	return lb
}

func (lb *loadBalancer) endpoint() string { return fmt.Sprintf("127.0.0.1:%d", lb.port) }
