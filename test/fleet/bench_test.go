package fleet

import (
	"context"
	"fmt"
	"os"
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

	"github.com/gpubuild/otelcol-gpubuild/internal/buildsim"
	"github.com/gpubuild/otelcol-gpubuild/internal/cloudwatchtest"
	"github.com/gpubuild/otelcol-gpubuild/test/internal/binarytest"
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
		sidecarConfig, env := "otelcol-config.yaml", []string{
			"GPUBUILD_CLOUDWATCH_OUTPUT=cloudwatch", "GPUBUILD_CLOUDWATCH_ENDPOINT=" + cw.Endpoint(),
			"GPUBUILD_CLOUDWATCH_NAMESPACE=" + namespace, "GPUBUILD_FLUSH_INTERVAL=" + flush.String(),
			"GPUBUILD_API_REQUESTS_FROM_SPANS=true", "GPUBUILD_GPU_COLLECTION_INTERVAL=1h",
		}
		if viaGateway {
			gw = newNode(b, "otelcol-gateway.yaml", gatewayEnv(cw, flush)...)
			gw.start()
			defer func() { _, _ = gw.Stop(30 * time.Second) }()
			sidecarConfig = "deploy/gateway-sidecar.yaml"
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

// BenchmarkGatewayOneCore drives one gateway (GOMAXPROCS=1, interval 1s)
// with 1,000 simulated workers, each sending its flush of 32 derived delta
// series (16 counters, 16 histograms shared by all workers) and one
// per-worker GPU gauge, four requests in flight per worker, for 20 s. It
// reports the data points acknowledged per CPU-second of the gateway
// process (merge, translation, PutMetricData to the local endpoint) and the
// gateway's peak RSS. Run with -benchtime 1x.
func BenchmarkGatewayOneCore(b *testing.B) {
	const workers, series, inFlight = 1000, 16, 4
	cw, err := cloudwatchtest.Start("127.0.0.1:0")
	require.NoError(b, err)
	defer func() { _ = cw.Close() }()
	gw := newNode(b, "otelcol-gateway.yaml", append(gatewayEnv(cw, time.Second), "GOMAXPROCS=1", "GPUBUILD_MEMORY_LIMIT_MIB=1000", "GPUBUILD_MEMORY_SPIKE_LIMIT_MIB=200", "GPUBUILD_QUEUE_SIZE=100000")...)
	gw.start()
	defer func() { _, _ = gw.Stop(30 * time.Second) }()

	conn, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", gw.grpc), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(b, err)
	defer func() { _ = conn.Close() }()
	client := pmetricotlp.NewGRPCClient(conn)
	reqs := make([]pmetricotlp.ExportRequest, workers)
	points := 0
	for i := range reqs {
		md := workerMetrics(i, series)
		points = md.DataPointCount()
		reqs[i] = pmetricotlp.NewExportRequestFromMetrics(md)
	}
	for range b.N {
		cpu0 := cpuSeconds(b, gw.Pid())
		var acked atomic.Int64
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		var wg sync.WaitGroup
		start := time.Now()
		// Each worker keeps inFlight requests open (each is held until its
		// interval is flushed), enough to keep the one core busy.
		for i := range workers * inFlight {
			i %= workers
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					if _, err := client.Export(ctx, reqs[i]); err == nil {
						acked.Add(int64(points))
					}
				}
			}()
		}
		wg.Wait()
		cancel()
		wall := time.Since(start).Seconds()
		cpu := cpuSeconds(b, gw.Pid()) - cpu0
		_, peak, _ := binarytest.MemKiB(gw.Pid())
		b.ReportMetric(float64(acked.Load())/cpu, "points/cpu-s")
		b.ReportMetric(float64(acked.Load())/wall, "points/s")
		b.ReportMetric(cpu/wall, "cores")
		b.ReportMetric(float64(peak)/1024, "peakRSS-MiB")
		b.Logf("%d points acknowledged in %.1fs wall, %.1f gateway CPU-s; %d PutMetricData requests, %d datums", acked.Load(), wall, cpu, cw.Stats().Accepted, len(cw.Datums()))
	}
}

func workerMetrics(worker, series int) pmetric.Metrics {
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
	// The GPU gauge: its own resource (the GPU's), kept per worker.
	grm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().CopyTo(grm.Resource())
	grm.Resource().Attributes().PutStr("gpu.uuid", fmt.Sprintf("GPU-%04d", worker))
	g := grm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	g.SetName("gpu.utilization")
	g.SetUnit("1")
	gp := g.SetEmptyGauge().DataPoints().AppendEmpty()
	gp.SetDoubleValue(0.5)
	gp.SetTimestamp(pcommonTime(now))
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
