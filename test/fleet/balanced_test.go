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

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/buildsim"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
)

// balancedTimings are a balanced fleet's timings: the gateways' interval
// and extra variables, the sidecars' extra variables (later ones win).
type balancedTimings struct {
	interval            time.Duration
	gatewayEnv, sideEnv []string
	jobs                int // each worker's builds while gateways are killed, at 1 a second
}

// shortTimings: a 2 s interval, connections closed every 3 s (each
// sidecar's connection moves between gateways many times), a short drain,
// 1 s sidecar flushes.
var shortTimings = balancedTimings{
	interval:   2 * time.Second,
	gatewayEnv: []string{"GPUBUILD_GATEWAY_MAX_CONNECTION_AGE=3s", "GPUBUILD_SHUTDOWN_DRAIN_TIMEOUT=2s"},
	jobs:       30,
}

// TestFleetBehindLoadBalancer: sidecars on the default config send through
// HAProxy (TCP, random backend per connection, health-checked as a
// Service's readiness probe) to three gateways whose connections age out
// every few seconds. While they send: a gateway killed with kill -9 right
// after it handed an interval over, and restarted; a sidecar killed with
// kill -9 while it sends; a gateway's pod replaced (kill -9, its directory
// started by a new process on other ports); then, CloudWatch down, a
// scale-down (SIGTERM) of a gateway that holds a backlog, whose directory
// comes back with the next scale-up. Every series lands exactly once.
func TestFleetBehindLoadBalancer(t *testing.T) { balancedFleet(t, shortTimings) }

func balancedFleet(t *testing.T, timings balancedTimings) {
	const workers = 6
	cw, err := cloudwatchtest.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = cw.Close() })

	slots := newSlots(t, 4) // three gateways and the replaced one's new place
	gateways := make([]*node, 3)
	for i := range gateways {
		gateways[i] = newNode(t, "otelcol-gateway.yaml", append(gatewayEnv(cw, timings.interval), timings.gatewayEnv...)...)
		gateways[i].onSlot(slots[i])
		gateways[i].start()
	}
	lb := startHAProxy(t, slots)
	sidecarNodes := make([]*node, workers)
	for i := range sidecarNodes {
		sidecarNodes[i] = newNode(t, sidecarConfig, append(sidecarEnvAt(lb.endpoint()), timings.sideEnv...)...)
		sidecarNodes[i].start()
	}

	tr := truth{}
	var duplicates float64
	counted := func(g *node) { duplicates += g.duplicates() }
	run := func(phase int, jobs int) func() {
		var wg sync.WaitGroup
		summaries := make([]*buildsim.Summary, workers)
		errs := make([]error, workers)
		for i, n := range sidecarNodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cfg := workload(n, i)
				cfg.Seed = int64(7000 + 100*phase + i)
				cfg.Jobs, cfg.Rate = jobs, 1
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute+2*time.Duration(jobs)*time.Second)
				defer cancel()
				summaries[i], errs[i] = buildsim.Run(ctx, cfg)
			}()
		}
		return func() {
			wg.Wait()
			for i, s := range summaries {
				require.NoError(t, errs[i], "phase %d worker %d", phase, i)
				require.Equal(t, s.Generated, s.Acknowledged)
				tr.addService(s.Generated)
			}
		}
	}

	wait := run(0, timings.jobs)
	// A gateway killed during the hand-over: right after its flush count
	// moved (the interval is on its way into the exporter's queue).
	g := gateways[0]
	require.True(t, binarytest.Eventually(60*time.Second+2*timings.interval, func() bool { return g.flushes() >= 2 }), "gateway 0 flushes")
	before := g.flushes()
	require.True(t, binarytest.Eventually(30*time.Second+timings.interval, func() bool { return g.flushes() > before }), "gateway 0 hands an interval over")
	counted(g)
	g.Kill9()
	g.start()
	t.Log("gateway 0 killed with kill -9 during a hand-over and restarted")

	// A sidecar killed while it sends.
	victim := sidecarNodes[2]
	require.True(t, binarytest.Eventually(30*time.Second, func() bool {
		return victim.telemetryValue("otelcol_exporter_sent_metric_points") > 0
	}), "sidecar 2 sends")
	victim.Kill9()
	victim.start() // on its ports: its build service goes on sending there

	// A pod replaced: gateway 1's node is gone; its volume is mounted by a
	// new process with another address.
	g = gateways[1]
	require.True(t, binarytest.Eventually(30*time.Second, func() bool { return g.pointsHeld() > 0 }), "gateway 1 holds acknowledged points")
	counted(g)
	g.Kill9()
	g.onSlot(slots[3])
	g.start()
	t.Log("gateway 1's pod replaced: its directory on a new process at another address")
	wait()

	// A scale-down while CloudWatch is down: gateway 2 holds a backlog and
	// gets SIGTERM; what its drain cannot send stays in its directory.
	require.NoError(t, cw.SetDown(true))
	wait = run(1, 10)
	g = gateways[2]
	require.True(t, binarytest.Eventually(60*time.Second+timings.interval, func() bool {
		return g.telemetryValue("otelcol_exporter_queue_size") > 0
	}), "gateway 2 holds a backlog")
	counted(g)
	_, err = g.Stop(30 * time.Second)
	require.NoError(t, err)
	wait()
	require.NoError(t, cw.SetDown(false))
	// The next scale-up mounts its volume again (a StatefulSet's claim is
	// kept on scale-down) and sends the backlog.
	g.start()
	t.Log("gateway 2 scaled down with a backlog while CloudWatch was down, and up again on its directory")

	var last []string
	ok := binarytest.Eventually(120*time.Second+2*timings.interval, func() bool {
		last = tr.mismatches(cw.Datums())
		return len(last) == 0
	})
	require.True(t, ok, "%d series differ, e.g.\n%v", len(last), head(last, 20))
	for _, n := range sidecarNodes {
		_, err := n.Stop(60 * time.Second)
		require.NoError(t, err)
	}
	for _, g := range gateways {
		counted(g)
		_, err := g.Stop(30 * time.Second)
		require.NoError(t, err)
	}
	assert.Empty(t, tr.mismatches(cw.Datums()), "after every process stopped: no double count")
	t.Logf("requests merged once although sent again (a retry reaching the gateway that had it): %v; series checked %d", duplicates, len(tr))
}
