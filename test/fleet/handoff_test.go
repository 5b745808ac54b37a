// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/promtext"
)

const handoffMetric = "handoff.jobs"

// sendJobs sends, as two workers, one delta point of value v for each of
// `series` series of handoff.jobs, and adds it to want.
func sendJobs(t *testing.T, gw *node, series int, v int64, want map[string]float64) {
	t.Helper()
	md := pmetric.NewMetrics()
	for _, worker := range []string{"worker-a", "worker-b"} {
		rm := md.ResourceMetrics().AppendEmpty()
		rm.Resource().Attributes().PutStr("service.name", "vector-index-build")
		rm.Resource().Attributes().PutStr("service.instance.id", worker)
		s := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
		s.SetName(handoffMetric)
		s.SetUnit("{job}")
		sum := s.SetEmptySum()
		sum.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
		sum.SetIsMonotonic(true)
		for i := range series {
			dp := sum.DataPoints().AppendEmpty()
			dp.Attributes().PutStr("series", strconv.Itoa(i))
			dp.SetTimestamp(pcommonTime(time.Now()))
			dp.SetIntValue(v)
			want[strconv.Itoa(i)] += float64(v)
		}
	}
	conn, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", gw.grpc), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = pmetricotlp.NewGRPCClient(conn).Export(ctx, pmetricotlp.NewExportRequestFromMetrics(md))
	require.NoError(t, err)
}

// handoffMismatches lists the series of handoff.jobs whose landed sum is
// not the sum sent.
func handoffMismatches(datums []cloudwatchtest.Datum, want map[string]float64) []string {
	got := map[string]float64{}
	for _, d := range datums {
		if d.MetricName == handoffMetric && d.Value != nil {
			got[d.Dimensions["series"]] += *d.Value
		}
	}
	var out []string
	for k, v := range want {
		if got[k] != v {
			out = append(out, fmt.Sprintf("series %s: landed %v, want %v", k, got[k], v))
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			out = append(out, fmt.Sprintf("series %s: landed %v, never sent", k, v))
		}
	}
	return out
}

func (n *node) exporterQueueSize() float64 {
	f, err := promtext.Scrape(fmt.Sprintf("127.0.0.1:%d", n.telemetry))
	require.NoError(n.t, err)
	v, _ := f.Sum("otelcol_exporter_queue_size", map[string]string{"exporter": "cloudwatch"})
	return v
}

// TestGatewayLeavingHandsItsBacklogToAPeer: CloudWatch is down; gateway A
// holds intervals in its queue and an open one when it is SIGTERMed with
// a hand-off endpoint pointing at gateway B's otlp/handoff receiver. Its
// drain gives up, the hand-off moves everything to B's queue, and A's
// directory is left with nothing to send (A started again on it, without
// a hand-off, has an empty queue and journal). Once CloudWatch is back,
// every datum of both gateways lands exactly once.
func TestGatewayLeavingHandsItsBacklogToAPeer(t *testing.T) {
	cw, err := cloudwatchtest.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = cw.Close() })
	require.NoError(t, cw.SetDown(true))
	const interval = time.Second
	// Retries at most 1 s apart: the hand-off starts at the retrying
	// request's next attempt, and CloudWatch's return is seen at once.
	env := append(gatewayEnv(cw, interval), "GPUBUILD_GATEWAY_RETRY_MAX_INTERVAL=1s")
	env = env[:len(env):len(env)] // each node appends to its own copy

	b := newNode(t, gatewayConfig, env...)
	b.start()
	a := newNode(t, gatewayConfig, append(env,
		fmt.Sprintf("GPUBUILD_GATEWAY_HANDOFF_ENDPOINT=127.0.0.1:%d", b.handoff),
		"GPUBUILD_GATEWAY_HANDOFF_TIMEOUT=30s",
		"GPUBUILD_SHUTDOWN_DRAIN_TIMEOUT=2s",
		"GPUBUILD_LOG_LEVEL=info")...)
	a.start()

	const series = 200
	want := map[string]float64{}
	// Several intervals queued at A (each round waits for A's next
	// flush), and B's own traffic.
	for round := int64(1); round <= 4; round++ {
		flushed := a.flushes()
		sendJobs(t, a, series, round, want)
		require.True(t, binarytest.Eventually(30*time.Second, func() bool { return a.flushes() > flushed }), "A flushes its interval")
	}
	sendJobs(t, b, series, 100, want)
	require.True(t, binarytest.Eventually(30*time.Second, func() bool { return a.exporterQueueSize() >= 4 }),
		"A's queue holds the intervals while CloudWatch is down")
	// The open interval at the SIGTERM is handed to A's queue, then on.
	sendJobs(t, a, series, 1000, want)

	took, err := a.Stop(90 * time.Second)
	require.NoError(t, err)
	out := a.Output.String()
	require.Contains(t, out, "The sending queue did not empty before shutdown_drain_timeout", "CloudWatch is down: the drain gives up")
	require.Contains(t, out, "Handed what the drain left to the peer", binarytest.Tail(out, 4000))
	assert.NotContains(t, out, "did not empty the queue before handoff.timeout")
	t.Logf("A stopped in %v (drain 2s, then the hand-off)", took.Round(100*time.Millisecond))

	accepted := func() float64 {
		f, err := promtext.Scrape(fmt.Sprintf("127.0.0.1:%d", b.telemetry))
		require.NoError(t, err)
		v, _ := f.Sum("otelcol_receiver_accepted_metric_points", map[string]string{"receiver": "otlp/handoff"})
		return v
	}
	assert.Positive(t, accepted(), "B's otlp/handoff receiver took A's backlog")

	// A's directory holds nothing to send: started again on it (no
	// hand-off, CloudWatch still down), it loads an empty queue and reads
	// nothing back from its journal.
	a.env = append(a.env, "GPUBUILD_GATEWAY_HANDOFF_ENDPOINT=")
	a.start()
	loaded := logFields(t, a.Output.String(), "Loaded queue metadata")
	assert.Equal(t, loaded["readIndex"], loaded["writeIndex"], "A's queue is empty after the hand-off: %v", loaded)
	assert.Equal(t, 0.0, loaded["dispatchedItems"], "nothing was left in flight: %v", loaded)
	assert.NotContains(t, a.Output.String(), "Read back requests acknowledged by the previous process", "A's journal is empty")

	require.NoError(t, cw.SetDown(false))
	var last []string
	ok := binarytest.Eventually(60*time.Second, func() bool {
		last = handoffMismatches(cw.Datums(), want)
		return len(last) == 0
	})
	require.True(t, ok, "every datum lands once: %v", head(last, 10))
	require.True(t, binarytest.Eventually(30*time.Second, func() bool { return b.exporterQueueSize() == 0 }))
	for _, n := range []*node{a, b} {
		_, err := n.Stop(30 * time.Second)
		require.NoError(t, err)
	}
	assert.Empty(t, handoffMismatches(cw.Datums(), want), "after both stopped: nothing sent twice")
}
