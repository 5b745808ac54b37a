// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/gpubuild/otelcol-gpubuild/internal/requestid"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
)

// BenchmarkGatewayDrain measures how large a backlog one gateway
// (GOMAXPROCS=1, as the manifest runs it) sends within its drain: during a
// CloudWatch outage 1,000 workers' per-worker gauges (8 each, 8,000
// datums per interval, 1 s intervals) pile up in its queue; CloudWatch
// comes back answering each PutMetricData call after
// GATEWAY_DRAIN_LATENCY (default 50ms, a call's time inside a region);
// once the first datum of the backlog landed the gateway gets SIGTERM
// with the manifest's drain timeout. Reported: datums and requests sent
// per second of drain, and the datums a 100 s drain sends at that rate.
//
// Run with -benchtime 1x.
func BenchmarkGatewayDrain(b *testing.B) {
	const workers, gauges, fill = 1000, 8, 20 * time.Second
	latency := envDuration(b, "GATEWAY_DRAIN_LATENCY", 50*time.Millisecond)
	for range b.N {
		cw, err := cloudwatchtest.Start("127.0.0.1:0")
		require.NoError(b, err)
		gw := newNode(b, "otelcol-gateway.yaml", append(gatewayEnv(cw, time.Second),
			"GOMAXPROCS=1", "GPUBUILD_SHUTDOWN_DRAIN_TIMEOUT=100s", "GPUBUILD_MEMORY_LIMIT_MIB=400", "GPUBUILD_MEMORY_SPIKE_LIMIT_MIB=100")...)
		gw.start()
		require.NoError(b, cw.SetDown(true))

		fillBacklog(b, gw, fill, workers, gauges)
		queued := gw.telemetryValue("otelcol_exporter_queue_size")

		cw.SetFaults(cloudwatchtest.Faults{Latency: latency})
		require.NoError(b, cw.SetDown(false))
		require.True(b, binarytest.Eventually(60*time.Second, func() bool { return len(cw.Datums()) > 0 }), "the backlog starts to land")
		before, requests0 := len(cw.Datums()), cw.Stats().Accepted
		took, err := gw.Stop(150 * time.Second)
		require.NoError(b, err)
		sent, requests := len(cw.Datums())-before, cw.Stats().Accepted-requests0
		perSecond := float64(sent) / took.Seconds()
		b.ReportMetric(perSecond, "datums/s")
		b.ReportMetric(float64(requests)/took.Seconds(), "requests/s")
		b.ReportMetric(perSecond*100, "datums-per-100s-drain")
		b.Logf("backlog of %v queued batches (%d datums in all); CloudWatch answering after %v; SIGTERM: %d datums in %d requests sent in %v (%.0f datums/s), exit after %v; left: %q",
			queued, len(cw.Datums()), latency, sent, requests, took.Round(time.Millisecond), perSecond, took.Round(time.Millisecond), leftLine(gw.Output.String()))
		_ = cw.Close()
	}
}

// leftLine is the drain's warning about what it left, if any.
func leftLine(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "did not empty before shutdown_drain_timeout") {
			return l
		}
	}
	return "nothing left"
}

// fillBacklog sends each of workers one request of its gauges in turn, each
// stamped with the next sequence number, to gw until fill has passed, then
// waits until every interval was handed to the exporter's queue: a backlog
// for a drain or a hand-off to move.
func fillBacklog(b *testing.B, gw *node, fill time.Duration, workers, gauges int) {
	b.Helper()
	conn, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", gw.grpc), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(b, err)
	defer func() { _ = conn.Close() }()
	client := pmetricotlp.NewGRPCClient(conn)
	var seq uint64
	start := time.Now()
	for time.Since(start) < fill {
		for w := range workers {
			md := workerMetrics(w, 1, gauges)
			seq++
			requestid.Stamp(md, requestid.ID{Instance: fmt.Sprintf("%032x", w), Sequence: seq})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := client.Export(ctx, pmetricotlp.NewExportRequestFromMetrics(md))
			cancel()
			require.NoError(b, err)
		}
	}
	require.True(b, binarytest.Eventually(30*time.Second, func() bool { return gw.pointsHeld() == 0 }), "every interval handed to the queue")
}

// envDuration is the duration in the environment variable name, or def
// when it is unset; a value that is not a duration fails the benchmark.
func envDuration(b *testing.B, name string, def time.Duration) time.Duration {
	b.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	require.NoError(b, err, name)
	return d
}
