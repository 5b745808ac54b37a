// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/gpubuild/otelcol-gpubuild/internal/requestid"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/buildsim"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/promtext"
)

// BenchmarkRequestsDirectVsGateway measures PutMetricData requests of the
// same workloads sent directly by each sidecar (otelcol-config.yaml) and
// through one gateway (otelcol-gateway.yaml): requests per worker per flush
// interval, and requests per gateway flush. Run with -benchtime 1x.
func BenchmarkRequestsDirectVsGateway(b *testing.B) {
	const workers = 10
	flush := 2 * time.Second
	run := func(b *testing.B, viaGateway bool) (requests int, elapsed time.Duration, gatewayFlushes float64, series int) {
		cw, err := cloudwatchtest.Start("127.0.0.1:0")
		require.NoError(b, err)
		defer func() { _ = cw.Close() }()
		var gw *node
		env := []string{
			"GPUBUILD_CLOUDWATCH_OUTPUT=cloudwatch", "GPUBUILD_CLOUDWATCH_ENDPOINT=" + cw.Endpoint(),
			"GPUBUILD_CLOUDWATCH_NAMESPACE=" + namespace, "GPUBUILD_FLUSH_INTERVAL=" + flush.String(),
			"GPUBUILD_API_REQUESTS_FROM_SPANS=true", "GPUBUILD_GPU_COLLECTION_INTERVAL=1h",
		}
		if viaGateway {
			gw = newNode(b, "otelcol-gateway.yaml", gatewayEnv(cw, flush)...)
			gw.start()
			defer func() { _, _ = gw.Stop(30 * time.Second) }()
			env = append(sidecarEnv(gw), "GPUBUILD_FLUSH_INTERVAL="+flush.String())
		}
		nodes := make([]*node, workers)
		for i := range nodes {
			nodes[i] = newNode(b, sidecarConfig, env...)
			nodes[i].start()
		}
		start := time.Now()
		var wg sync.WaitGroup
		errs := make([]error, workers)
		for i, n := range nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cfg := workload(n, i)
				cfg.Jobs, cfg.Rate = 20, 1
				_, errs[i] = buildsim.Run(context.Background(), cfg)
			}()
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(b, err)
		}
		for _, n := range nodes {
			_, _ = n.Stop(60 * time.Second)
		}
		elapsed = time.Since(start)
		if gw != nil {
			gatewayFlushes = gw.flushes()
			_, _ = gw.Stop(30 * time.Second)
		}
		distinct := map[string]bool{}
		for _, d := range cw.Datums() {
			distinct[d.MetricName+dimKey(d.Dimensions)] = true
		}
		return cw.Stats().Accepted, elapsed, gatewayFlushes, len(distinct)
	}
	for range b.N {
		direct, de, _, ds := run(b, false)
		perWorkerFlush := float64(direct) / workers / (de.Seconds() / flush.Seconds())
		via, ge, flushes, gs := run(b, true)
		b.ReportMetric(perWorkerFlush, "direct-req/worker/flush")
		b.ReportMetric(float64(via)/flushes, "gateway-req/flush")
		b.Logf("direct: %d workers, %d requests in %v (flush %v), %d distinct series; gateway: %d requests in %v over %v flushes, %d distinct series",
			workers, direct, de.Round(time.Second), flush, ds, via, ge.Round(time.Second), flushes, gs)
	}
}

// BenchmarkGatewayOneCore drives one gateway (GOMAXPROCS=1, the shipped
// 60 s interval and receipt journal) with 1,000 simulated sidecars, each
// request stamped like a sidecar's (instance id, sequence) and carrying one
// worker's flush: 32 derived delta series shared by every worker (16
// counters, 16 histograms) and 8 per-worker GPU gauges. Two phases:
//
//   - production pace, 70 s (an interval hand-over included): each sidecar
//     sends 3 requests per 10 s (300 requests/s in all), the pace of its
//     10 s connector flush, GPU scrape and processor flush. Reported: the
//     gateway's CPU (cores), its peak RSS, and the answer time per request
//     (median, 99th percentile): the window in which a request the gateway
//     wrote is not yet answered.
//   - saturation, 20 s: the same requests with 64 in flight, as fast as the
//     gateway answers. Reported: requests and points acknowledged per second
//     and per CPU-second.
//
// Run with -benchtime 1x.
func BenchmarkGatewayOneCore(b *testing.B) {
	const workers, series, gauges = 1000, 16, 8
	cw, err := cloudwatchtest.Start("127.0.0.1:0")
	require.NoError(b, err)
	defer func() { _ = cw.Close() }()
	gw := newNode(b, "otelcol-gateway.yaml", append(gatewayEnv(cw, time.Minute), "GOMAXPROCS=1")...)
	gw.start()
	defer func() { _, _ = gw.Stop(30 * time.Second) }()

	conn, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", gw.grpc), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(b, err)
	defer func() { _ = conn.Close() }()
	client := pmetricotlp.NewGRPCClient(conn)
	bodies := make([]pmetric.Metrics, workers)
	points := 0
	for i := range bodies {
		bodies[i] = workerMetrics(i, series, gauges)
		points = bodies[i].DataPointCount()
	}
	seqs := make([]atomic.Uint64, workers)
	send := func(ctx context.Context, w int) (time.Duration, error) {
		md := pmetric.NewMetrics()
		bodies[w].CopyTo(md)
		now := pcommonTime(time.Now())
		setTimestamps(md, now)
		requestid.Stamp(md, requestid.ID{Instance: fmt.Sprintf("%032x", w), Sequence: seqs[w].Add(1)})
		t0 := time.Now()
		_, err := client.Export(ctx, pmetricotlp.NewExportRequestFromMetrics(md))
		return time.Since(t0), err
	}
	for range b.N {
		// Production pace.
		const pace, paced = 10 * time.Second, 70 * time.Second
		cpu0 := cpuSeconds(b, gw.Pid())
		var mu sync.Mutex
		var answers []time.Duration
		var failed atomic.Int64
		ctx, cancel := context.WithTimeout(context.Background(), paced)
		var wg sync.WaitGroup
		start := time.Now()
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Each sidecar's three requests, spread over its 10 s.
				offset := time.Duration(w) * pace / workers
				tick := time.NewTimer(offset)
				defer tick.Stop()
				for k := 0; ; k++ {
					select {
					case <-ctx.Done():
						return
					case <-tick.C:
					}
					tick.Reset(pace / 3)
					d, err := send(ctx, w)
					if err != nil {
						if ctx.Err() == nil {
							failed.Add(1)
						}
						continue
					}
					mu.Lock()
					answers = append(answers, d)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		cancel()
		wall := time.Since(start).Seconds()
		cpu := cpuSeconds(b, gw.Pid()) - cpu0
		_, peak, _ := binarytest.MemKiB(gw.Pid())
		slices.Sort(answers)
		p50, p99 := answers[len(answers)/2], answers[len(answers)*99/100]
		b.ReportMetric(float64(len(answers))/wall, "paced-req/s")
		b.ReportMetric(cpu/wall, "paced-cores")
		b.ReportMetric(float64(peak)/1024, "peakRSS-MiB")
		b.ReportMetric(float64(p50.Microseconds()), "answer-p50-µs")
		b.ReportMetric(float64(p99.Microseconds()), "answer-p99-µs")
		b.Logf("production pace: %d sidecars, %d requests (%d points each) in %.1fs, %d failed; gateway %.2f cores, peak RSS %.1f MiB, answer p50 %v p99 %v, %v flushes",
			workers, len(answers), points, wall, failed.Load(), cpu/wall, float64(peak)/1024, p50, p99, gw.flushes())
		require.Zero(b, failed.Load(), "every request acknowledged")

		// Saturation.
		cpu0 = cpuSeconds(b, gw.Pid())
		var acked atomic.Int64
		ctx, cancel = context.WithTimeout(context.Background(), 20*time.Second)
		start = time.Now()
		for g := range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for w := g; ctx.Err() == nil; w = (w + 64) % workers {
					if _, err := send(ctx, w); err == nil {
						acked.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		cancel()
		wall = time.Since(start).Seconds()
		cpu = cpuSeconds(b, gw.Pid()) - cpu0
		_, peak, _ = binarytest.MemKiB(gw.Pid())
		b.ReportMetric(float64(acked.Load())/wall, "req/s")
		b.ReportMetric(float64(acked.Load())*float64(points)/wall, "points/s")
		b.ReportMetric(float64(acked.Load())*float64(points)/cpu, "points/cpu-s")
		b.Logf("saturation: %d requests acknowledged in %.1fs wall, %.1f gateway CPU-s (%.0f requests/s, %.0f points/s); peak RSS %.1f MiB; %d PutMetricData requests, %d datums so far",
			acked.Load(), wall, cpu, float64(acked.Load())/wall, float64(acked.Load())*float64(points)/wall, float64(peak)/1024, cw.Stats().Accepted, len(cw.Datums()))
	}
}

// BenchmarkSidecarRequestsPerSecond sends 60 metric requests per second for
// 30 s to one sidecar (otelcol-config.yaml, GPUBUILD_DESTINATIONS=gateway) exporting to one
// gateway at the shipped 60 s interval, and samples the sidecar's queue
// every 500 ms: the requests it sent on per second and its largest queue.
// Run with -benchtime 1x.
func BenchmarkSidecarRequestsPerSecond(b *testing.B) {
	const rate, duration = 60, 30 * time.Second
	cw, err := cloudwatchtest.Start("127.0.0.1:0")
	require.NoError(b, err)
	defer func() { _ = cw.Close() }()
	gw := newNode(b, "otelcol-gateway.yaml", gatewayEnv(cw, time.Minute)...)
	gw.start()
	defer func() { _, _ = gw.Stop(30 * time.Second) }()
	sc := newNode(b, sidecarConfig, sidecarEnv(gw)...)
	sc.start()
	defer func() { _, _ = sc.Stop(30 * time.Second) }()
	conn, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", sc.grpc), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(b, err)
	defer func() { _ = conn.Close() }()
	client := pmetricotlp.NewGRPCClient(conn)
	for range b.N {
		sent0 := sc.telemetryValue("otelcol_exporter_sent_metric_points")
		var maxQueue float64
		var samples int
		stop := make(chan struct{})
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			t := time.NewTicker(500 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					if q, err := queueSizeOf(sc); err == nil {
						maxQueue = max(maxQueue, q)
						samples++
					}
				}
			}
		}()
		tick := time.NewTicker(time.Second / rate)
		start := time.Now()
		sent := 0
		for time.Since(start) < duration {
			<-tick.C
			md := processed("worker-00", 1, time.Now())
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := client.Export(ctx, pmetricotlp.NewExportRequestFromMetrics(md))
			cancel()
			require.NoError(b, err)
			sent++
		}
		tick.Stop()
		wall := time.Since(start)
		// Everything the sidecar took reaches the gateway.
		ok := binarytest.Eventually(30*time.Second, func() bool {
			return sc.telemetryValue("otelcol_exporter_sent_metric_points")-sent0 >= float64(sent)
		})
		close(stop)
		<-sampled
		require.True(b, ok, "the sidecar sent everything on")
		b.ReportMetric(float64(sent)/wall.Seconds(), "req/s")
		b.ReportMetric(maxQueue, "max-queue")
		b.Logf("%d requests in %v (%.1f/s) through one sidecar to a gateway at the 60 s interval; largest sidecar queue over %d samples: %v",
			sent, wall.Round(time.Millisecond), float64(sent)/wall.Seconds(), samples, maxQueue)
	}
}

// queueSizeOf is a sidecar's queued requests to the gateway, without
// failing the test (sampled from another goroutine).
func queueSizeOf(n *node) (float64, error) {
	f, err := promtext.Scrape(fmt.Sprintf("127.0.0.1:%d", n.telemetry))
	if err != nil {
		return 0, err
	}
	v, _ := f.Sum("otelcol_exporter_queue_size", map[string]string{"exporter": "otlp_grpc/gateway"})
	return v, nil
}

// setTimestamps stamps every point of md with ts.
func setTimestamps(md pmetric.Metrics, ts pcommon.Timestamp) {
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		ms := rms.At(i).ScopeMetrics().At(0).Metrics()
		for j := 0; j < ms.Len(); j++ {
			m := ms.At(j)
			switch m.Type() {
			case pmetric.MetricTypeSum:
				for k := 0; k < m.Sum().DataPoints().Len(); k++ {
					m.Sum().DataPoints().At(k).SetTimestamp(ts)
				}
			case pmetric.MetricTypeHistogram:
				for k := 0; k < m.Histogram().DataPoints().Len(); k++ {
					m.Histogram().DataPoints().At(k).SetTimestamp(ts)
				}
			case pmetric.MetricTypeGauge:
				for k := 0; k < m.Gauge().DataPoints().Len(); k++ {
					m.Gauge().DataPoints().At(k).SetTimestamp(ts)
				}
			}
		}
	}
}

func workerMetrics(worker, series, gauges int) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "vector-index-build")
	rm.Resource().Attributes().PutStr("service.instance.id", fmt.Sprintf("worker-%04d", worker))
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	c := ms.AppendEmpty()
	c.SetName("build.stage.runs")
	c.SetUnit("{run}")
	s := c.SetEmptySum()
	s.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	s.SetIsMonotonic(true)
	h := ms.AppendEmpty()
	h.SetName("build.stage.duration")
	h.SetUnit("s")
	hg := h.SetEmptyHistogram()
	hg.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	bounds := []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}
	now := time.Now()
	for i := range series {
		dp := s.DataPoints().AppendEmpty()
		dp.Attributes().PutStr("build.stage", fmt.Sprintf("stage-%d", i%8))
		dp.Attributes().PutStr("build.engine", fmt.Sprintf("engine-%d", i/8))
		dp.SetIntValue(1)
		dp.SetTimestamp(pcommonTime(now))
		hp := hg.DataPoints().AppendEmpty()
		dp.Attributes().CopyTo(hp.Attributes())
		hp.SetTimestamp(pcommonTime(now))
		hp.ExplicitBounds().FromRaw(bounds)
		counts := make([]uint64, len(bounds)+1)
		counts[i%len(counts)] = 1
		hp.BucketCounts().FromRaw(counts)
		hp.SetCount(1)
		hp.SetSum(bounds[i%len(bounds)])
		hp.SetMin(bounds[i%len(bounds)])
		hp.SetMax(bounds[i%len(bounds)])
	}
	// The GPU gauges: their own resource (the GPU's), kept per worker.
	grm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().CopyTo(grm.Resource())
	grm.Resource().Attributes().PutStr("hw.id", fmt.Sprintf("GPU-%04d", worker))
	gms := grm.ScopeMetrics().AppendEmpty().Metrics()
	for k := range gauges {
		g := gms.AppendEmpty()
		g.SetName(fmt.Sprintf("hw.gpu.gauge.%d", k))
		g.SetUnit("1")
		gp := g.SetEmptyGauge().DataPoints().AppendEmpty()
		gp.SetDoubleValue(0.5)
		gp.SetTimestamp(pcommonTime(now))
	}
	return md
}

// cpuSeconds is the process's user+system CPU time (/proc/<pid>/stat, in
// clock ticks of 1/100 s).
func cpuSeconds(b *testing.B, pid int) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(b, err)
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100
}

func pcommonTime(t time.Time) pcommon.Timestamp { return pcommon.NewTimestampFromTime(t) }
