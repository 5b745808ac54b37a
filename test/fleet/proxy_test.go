// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/buildsim"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
)

// proxy forwards TCP connections to a gateway; it can swallow the
// gateway's answers (the sidecar's requests are written, their
// acknowledgements never arrive: a timeout) and reset every connection.
type proxy struct {
	ln          net.Listener
	target      string
	dropReplies atomic.Bool
	dropped     atomic.Int64 // bytes of answers swallowed
	mu          sync.Mutex
	conns       []net.Conn
}

func startProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &proxy{ln: ln, target: target}
	t.Cleanup(func() { _ = ln.Close(); p.resetAll() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(s, c); _ = s.Close() }()
			go func() {
				buf := make([]byte, 32<<10)
				for {
					n, err := s.Read(buf)
					if n > 0 {
						if p.dropReplies.Load() {
							p.dropped.Add(int64(n))
						} else if _, werr := c.Write(buf[:n]); werr != nil {
							break
						}
					}
					if err != nil {
						break
					}
				}
				_ = c.Close()
			}()
		}
	}()
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

// resetAll closes every connection with a TCP reset.
func (p *proxy) resetAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = c.Close()
	}
	p.conns = nil
}

// TestRetriesAfterTimeoutsAndResetsMergeOnce: a sidecar's requests reach
// the gateway, which writes and answers them, but the answers are lost for
// longer than the sidecar's timeout (10 s, shipped); then every connection
// is reset. The sidecar sends the same requests again, with the identities
// stamped before its queue; the gateway drops them as repeats (counted),
// and every series lands exactly once.
func TestRetriesAfterTimeoutsAndResetsMergeOnce(t *testing.T) {
	cw, err := cloudwatchtest.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = cw.Close() })
	gw := newNode(t, "otelcol-gateway.yaml", gatewayEnv(cw, gatewayInterval)...)
	gw.start()
	px := startProxy(t, fmt.Sprintf("127.0.0.1:%d", gw.grpc))
	sc := newNode(t, sidecarConfig, sidecarEnvAt(px.addr())...)
	sc.start()

	var s *buildsim.Summary
	done := make(chan error, 1)
	go func() {
		cfg := workload(sc, 0)
		cfg.Jobs, cfg.Rate = 40, 1
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		var err error
		s, err = buildsim.Run(ctx, cfg)
		done <- err
	}()
	require.True(t, binarytest.Eventually(60*time.Second, func() bool { return gw.flushes() >= 1 }), "data flows")
	px.dropReplies.Store(true)
	// The sidecar times out (10 s) waiting for answers the gateway sent,
	// and sends the same requests again: the gateway sees repeats.
	require.True(t, binarytest.Eventually(90*time.Second, func() bool { return gw.duplicates() > 0 }),
		"the sidecar sent again requests the gateway had written")
	px.resetAll()
	px.dropReplies.Store(false)
	require.NoError(t, <-done)
	require.Equal(t, s.Generated, s.Acknowledged)

	tr := truth{}
	tr.addService(s.Generated)
	tr.requireLanded(t, cw, 90*time.Second)
	_, err = sc.Stop(30 * time.Second)
	require.NoError(t, err)
	dups := gw.duplicates()
	_, err = gw.Stop(30 * time.Second)
	require.NoError(t, err)
	assert.Empty(t, tr.mismatches(cw.Datums()), "after every process stopped: no double count")
	t.Logf("answers swallowed: %d bytes; requests sent again and dropped by the gateway: %v", px.dropped.Load(), dups)
	assert.Positive(t, dups, "the sidecar did send requests again")
}

// TestRetriesAfterAGatewayKillMergeOnce: the gateway writes a sidecar's
// requests but its answers are lost, then it is killed with SIGKILL and
// restarted on its directory. The sidecar sends the unanswered requests
// again; the restarted gateway read them back from its journal and drops
// the repeats (counted); every series lands exactly once.
func TestRetriesAfterAGatewayKillMergeOnce(t *testing.T) {
	cw, err := cloudwatchtest.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = cw.Close() })
	gw := newNode(t, "otelcol-gateway.yaml", gatewayEnv(cw, gatewayInterval)...)
	gw.start()
	px := startProxy(t, fmt.Sprintf("127.0.0.1:%d", gw.grpc))
	sc := newNode(t, sidecarConfig, sidecarEnvAt(px.addr())...)
	sc.start()

	var s *buildsim.Summary
	done := make(chan error, 1)
	go func() {
		cfg := workload(sc, 0)
		cfg.Jobs, cfg.Rate = 30, 1
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		var err error
		s, err = buildsim.Run(ctx, cfg)
		done <- err
	}()
	require.True(t, binarytest.Eventually(60*time.Second, func() bool { return gw.flushes() >= 1 }), "data flows")
	px.dropReplies.Store(true)
	accepted := gw.telemetryValue("otelcol_receiver_accepted_metric_points")
	require.True(t, binarytest.Eventually(30*time.Second, func() bool {
		return gw.telemetryValue("otelcol_receiver_accepted_metric_points") > accepted
	}), "the gateway wrote requests whose answers are lost")
	gw.Kill9()
	gw.start()
	px.resetAll()
	px.dropReplies.Store(false)
	require.NoError(t, <-done)
	require.Equal(t, s.Generated, s.Acknowledged)

	tr := truth{}
	tr.addService(s.Generated)
	tr.requireLanded(t, cw, 90*time.Second)
	_, err = sc.Stop(30 * time.Second)
	require.NoError(t, err)
	dups := gw.duplicates()
	_, err = gw.Stop(30 * time.Second)
	require.NoError(t, err)
	assert.Empty(t, tr.mismatches(cw.Datums()), "after every process stopped: no double count")
	t.Logf("requests the killed gateway wrote, sent again and dropped by its successor: %v", dups)
	assert.Positive(t, dups, "the sidecar sent again requests the killed gateway had written")
}
