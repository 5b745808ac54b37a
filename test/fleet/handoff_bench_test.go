// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
)

// BenchmarkGatewayHandoff measures how fast a gateway leaving the set
// hands its backlog to a peer: during a CloudWatch outage 1,000 workers'
// per-worker gauges (8 each, 8,000 datums per 1 s interval) pile up in
// gateway A's queue (the backlog of BenchmarkGatewayDrain); A gets
// SIGTERM with a 1 s drain and a hand-off endpoint pointing at gateway B
// on the same host. Both run as the manifest runs them (GOMAXPROCS=1,
// fsync on: B acknowledges each request once it is on disk). Reported,
// from A's log: data points (one datum each) and requests handed off per
// second of hand-off, and the points a 60 s hand-off moves at that rate.
//
// GATEWAY_HANDOFF_FILL (default 20s) is how long the backlog piles up.
// Run with -benchtime 1x.
func BenchmarkGatewayHandoff(b *testing.B) {
	const workers, gauges = 1000, 8
	fill := envDuration(b, "GATEWAY_HANDOFF_FILL", 20*time.Second)
	for range b.N {
		cw, err := cloudwatchtest.Start("127.0.0.1:0")
		require.NoError(b, err)
		require.NoError(b, cw.SetDown(true))
		env := append(gatewayEnv(cw, time.Second), "GOMAXPROCS=1", "GPUBUILD_GATEWAY_FSYNC=true",
			"GPUBUILD_MEMORY_LIMIT_MIB=400", "GPUBUILD_MEMORY_SPIKE_LIMIT_MIB=100", "GPUBUILD_GATEWAY_RETRY_MAX_INTERVAL=1s")
		env = env[:len(env):len(env)]
		peer := newNode(b, gatewayConfig, env...)
		peer.start()
		gw := newNode(b, gatewayConfig, append(env,
			fmt.Sprintf("GPUBUILD_GATEWAY_HANDOFF_ENDPOINT=127.0.0.1:%d", peer.handoff),
			"GPUBUILD_GATEWAY_HANDOFF_TIMEOUT=300s", "GPUBUILD_SHUTDOWN_DRAIN_TIMEOUT=1s", "GPUBUILD_LOG_LEVEL=info")...)
		gw.start()

		fillBacklog(b, gw, fill, workers, gauges)
		queued := gw.exporterQueueSize()

		took, err := gw.Stop(360 * time.Second)
		require.NoError(b, err)
		line := handoffLine(b, gw.Output.String())
		points, requests, seconds := line["handed_off_points"].(float64), line["handed_off_requests"].(float64), line["took"].(float64)
		b.ReportMetric(points/seconds, "points/s")
		b.ReportMetric(requests/seconds, "requests/s")
		b.ReportMetric(points/seconds*60, "points-per-60s-handoff")
		b.Logf("backlog of %v queued batches; SIGTERM: %v points in %v requests handed off in %.1f s (%.0f points/s), %v left; exit after %v; the peer's queue: %v batches",
			queued, points, requests, seconds, points/seconds, line["left"], took.Round(time.Millisecond), peer.exporterQueueSize())
		_, err = peer.Stop(30 * time.Second)
		require.NoError(b, err)
		_ = cw.Close()
	}
}

// handoffLine is the fields of the hand-off's last log line.
func handoffLine(tb testing.TB, out string) map[string]any {
	tb.Helper()
	return logFields(tb, out, "Handed what the drain left to the peer", "did not empty the queue before handoff.timeout")
}

// logFields is the fields of the first log line in out that holds one of
// messages.
func logFields(tb testing.TB, out string, messages ...string) map[string]any {
	tb.Helper()
	for _, l := range strings.Split(out, "\n") {
		for _, m := range messages {
			if !strings.Contains(l, m) {
				continue
			}
			i := strings.Index(l, "{")
			require.GreaterOrEqual(tb, i, 0, l)
			var fields map[string]any
			require.NoError(tb, json.Unmarshal([]byte(l[i:]), &fields), l)
			return fields
		}
	}
	require.FailNow(tb, "not in the log", "%q\n%s", messages, binarytest.Tail(out, 4000))
	return nil
}
