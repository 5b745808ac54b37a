// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/buildsim"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
)

// TestGatewaySetChanges: the sidecars' static gateway list changes between
// runs: [A], then [A, B] (a gateway added: metric names move to B while A
// may still hold an open interval of them), then [B] (A drained with
// SIGTERM and removed). Each sidecar restarts on its queue directory, and
// what a stop left there is sent by the next start.
// Every series still lands exactly once in total: a move costs at most an
// extra datum for that interval, never a count.
func TestGatewaySetChanges(t *testing.T) {
	const workers = 6
	cw, err := cloudwatchtest.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = cw.Close() })

	a := newNode(t, "otelcol-gateway.yaml", gatewayEnv(cw, gatewayInterval)...)
	b := newNode(t, "otelcol-gateway.yaml", gatewayEnv(cw, gatewayInterval)...)
	a.start()
	b.start()

	sidecarNodes := make([]*node, workers)
	for i := range sidecarNodes {
		sidecarNodes[i] = newNode(t, sidecarConfig)
	}
	tr := truth{}
	phases := []struct {
		name     string
		gateways []*node
	}{
		{"[A]", []*node{a}},
		{"[A B]", []*node{a, b}},
		{"[B]", []*node{b}},
	}
	for p, phase := range phases {
		if phase.name == "[B]" {
			_, err := a.Stop(30 * time.Second)
			require.NoError(t, err, "gateway A drains its open interval on SIGTERM")
		}
		var wg sync.WaitGroup
		summaries := make([]*buildsim.Summary, workers)
		errs := make([]error, workers)
		for i, n := range sidecarNodes {
			n.env = sidecarEnv(phase.gateways[i%len(phase.gateways)])
			n.pickPorts()
			n.start()
			wg.Add(1)
			go func() {
				defer wg.Done()
				cfg := workload(n, i)
				cfg.Seed = int64(5000 + 100*p + i)
				cfg.Jobs = 12
				cfg.Rate = 4
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				summaries[i], errs[i] = buildsim.Run(ctx, cfg)
			}()
		}
		wg.Wait()
		for i, s := range summaries {
			require.NoError(t, errs[i], "%s worker %d", phase.name, i)
			require.Equal(t, s.Generated, s.Acknowledged)
			tr.addService(s.Generated)
		}
		// The sidecars stop (SIGTERM: final flush; what their outer queue
		// still holds stays on disk) and come back with the next list.
		for _, n := range sidecarNodes {
			_, err := n.Stop(60 * time.Second)
			require.NoError(t, err, "%s: sidecar stop", phase.name)
		}
	}
	// One more start of every sidecar, on [B], sends what the last stop left
	// on disk.
	for _, n := range sidecarNodes {
		n.pickPorts()
		n.start()
	}
	tr.requireLanded(t, cw, 90*time.Second)
	for _, n := range sidecarNodes {
		_, err := n.Stop(60 * time.Second)
		require.NoError(t, err)
	}
	_, err = b.Stop(30 * time.Second)
	require.NoError(t, err)
	assert.Empty(t, tr.mismatches(cw.Datums()), "after every gateway stopped: no double count")
}
