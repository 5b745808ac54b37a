// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build production

package fleet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/buildsim"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
	"github.com/gpubuild/otelcol-gpubuild/receiver/nvmlreceiver/fakenvml"
)

// TestFleetAtProductionTiming (make fleet-production, about 5 minutes):
// the shipped timings end to end. Two gateways at the shipped 60 s
// interval, 10 sidecars at the shipped 10 s flushes and GPU scrapes (a
// fake libnvidia-ml.so.1 with one GPU each), every build service running
// for 4 minutes (4 intervals). Mid-run: sidecar 2 killed with SIGKILL
// while it sends and restarted on its directory, gateway 1 killed with
// SIGKILL while its open interval holds acknowledged requests and
// restarted on its directory, and one worker's service stamps its own
// metrics 3 h ahead. No sidecar's queue grows (sampled every 2 s), every
// derived series lands exactly (the workloads' ground truth), the on-time
// services' counter lands exactly, the skewed worker's points are refused
// and counted.
func TestFleetAtProductionTiming(t *testing.T) {
	const workers = 10
	cw, err := cloudwatchtest.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = cw.Close() })

	dir := t.TempDir()
	libDir := filepath.Join(dir, "lib")
	require.NoError(t, os.Mkdir(libDir, 0o700))
	_, err = fakenvml.Build(libDir, binarytest.RepoRoot())
	require.NoError(t, err)
	statePath := filepath.Join(dir, "state.txt")
	require.NoError(t, fakenvml.State{}.WriteFile(statePath))

	gateways := make([]*node, 2)
	for i := range gateways {
		env := gatewayEnv(cw, time.Minute) // the shipped interval
		gateways[i] = newNode(t, "otelcol-gateway.yaml", env...)
		gateways[i].start()
	}
	nodes := make([]*node, workers)
	for i := range nodes {
		sc := fakenvml.Scenario{Driver: "535.161.08", GPUs: []fakenvml.GPU{{
			UUID: fmt.Sprintf("GPU-de570000-0000-4000-8000-%012d", i), Name: "NVIDIA A100-SXM4-80GB",
			BusID: "00000000:07:00.0", MemTotal: 80 << 30, MemUsed: 2 << 30, MemReserved: 256 << 20,
			Temperature: 51, PowerMW: 250_500, PowerLimitMW: 400_000, EnergyMJ: 5_000_000,
			ClockSM: 1410, ClockMem: 1593, ClockGraphics: 1410, UtilGPU: 64, UtilMem: 20,
		}}}
		scenarioPath := filepath.Join(dir, fmt.Sprintf("scenario-%d.txt", i))
		require.NoError(t, sc.WriteFile(scenarioPath))
		env := []string{
			"GPUBUILD_DESTINATIONS=gateway",
			fmt.Sprintf("GPUBUILD_GATEWAY_ENDPOINT=127.0.0.1:%d", gateways[i%2].grpc),
			"GPUBUILD_API_REQUESTS_FROM_SPANS=true",
			"LD_LIBRARY_PATH=" + libDir, fakenvml.EnvScenario + "=" + scenarioPath, fakenvml.EnvState + "=" + statePath,
		}
		nodes[i] = newNode(t, sidecarConfig, env...)
		nodes[i].start()
	}

	// Queue sizes, sampled until the end of the run.
	var (
		mu       sync.Mutex
		maxQueue = make([]float64, workers)
		samples  int
	)
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-tick.C:
			}
			mu.Lock()
			for i, n := range nodes {
				if n.Exited() {
					continue
				}
				if q, err := queueSizeOf(n); err == nil {
					maxQueue[i] = max(maxQueue[i], q)
				}
			}
			samples++
			mu.Unlock()
		}
	}()

	// The build services: 4 minutes of builds each.
	summaries := make([]*buildsim.Summary, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg := workload(nodes[i], i)
			cfg.Jobs, cfg.Rate = 60, 0.25
			cfg.RetryMaxElapsed = 5 * time.Minute
			ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
			defer cancel()
			summaries[i], errs[i] = buildsim.Run(ctx, cfg)
		}()
	}
	// Services' own delta counter, one of them stamped 3 h ahead, every 10 s.
	var onTime int64
	skewedSent := 0
	services := make(chan struct{})
	go func() {
		defer close(services)
		conns := make([]pmetricotlp.GRPCClient, 3)
		for k := range conns {
			conn, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", nodes[7+k].grpc), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				return
			}
			defer conn.Close()
			conns[k] = pmetricotlp.NewGRPCClient(conn)
		}
		for r := 0; time.Since(start) < 4*time.Minute; r++ {
			for k, c := range conns {
				skew := time.Duration(0)
				if k == 1 {
					skew = 3 * time.Hour
				}
				v := int64(1 + r%5)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_, err := c.Export(ctx, pmetricotlp.NewExportRequestFromMetrics(processed(fmt.Sprintf("worker-%02d", 7+k), v, time.Now().Add(skew))))
				cancel()
				if err == nil {
					if skew == 0 {
						onTime += v
					} else {
						skewedSent++
					}
				}
			}
			time.Sleep(10 * time.Second)
		}
	}()

	// Faults, each inside a gateway interval.
	time.Sleep(70 * time.Second)
	victim := nodes[2]
	require.Positive(t, victim.telemetryValue("otelcol_exporter_sent_metric_points"), "sidecar 2 sends")
	victim.Kill9()
	victim.start()
	t.Logf("%v: sidecar 2 killed with SIGKILL and restarted", time.Since(start).Round(time.Second))
	require.True(t, binarytest.Eventually(60*time.Second, func() bool { return gateways[1].pointsHeld() >= 20 }))
	held := gateways[1].pointsHeld()
	gatewayFlushes, gatewayDuplicates := gateways[1].flushes(), gateways[1].duplicates()
	gateways[1].Kill9()
	gateways[1].start()
	t.Logf("%v: gateway 1 killed with SIGKILL holding %v acknowledged points, restarted", time.Since(start).Round(time.Second), held)

	wg.Wait()
	<-services
	tr := truth{}
	for i, s := range summaries {
		require.NoError(t, errs[i], "worker %d", i)
		require.Equal(t, s.Generated, s.Acknowledged, "worker %d", i)
		tr.addService(s.Generated)
	}
	var last []string
	var got float64
	ok := binarytest.Eventually(3*time.Minute, func() bool {
		last = tr.mismatches(cw.Datums())
		got, _ = landed(cw.Datums(), "vectors.processed", map[string]string{"build.engine": "faiss"})
		return len(last) == 0 && got == float64(onTime)
	})
	close(stopSampling)
	<-sampled
	elapsed := time.Since(start)
	require.True(t, ok, "%d series differ, e.g.\n%v\nvectors.processed landed %v, want %d", len(last), head(last, 20), got, onTime)

	for _, n := range nodes {
		_, err := n.Stop(60 * time.Second)
		assert.NoError(t, err)
	}
	var outOfRange float64
	flushes, duplicates := gatewayFlushes, gatewayDuplicates
	for _, g := range gateways {
		outOfRange += g.telemetryValue("otelcol_intervalmerge_points_out_of_range")
		flushes += g.flushes()
		duplicates += g.duplicates()
		_, err := g.Stop(60 * time.Second)
		assert.NoError(t, err)
	}
	assert.Empty(t, tr.mismatches(cw.Datums()), "after every process stopped: no double count")
	got, _ = landed(cw.Datums(), "vectors.processed", map[string]string{"build.engine": "faiss"})
	assert.Equal(t, float64(onTime), got)
	assert.Equal(t, float64(skewedSent), outOfRange, "every skewed point refused and counted")

	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d sidecars, 2 gateways at 60 s, %v: %d derived series exact, %d PutMetricData requests over %v gateway flushes, %v requests dropped as repeats, %d skewed points refused; largest queue per sidecar over %d samples: %v",
		workers, elapsed.Round(time.Second), len(tr), cw.Stats().Accepted, flushes, duplicates, skewedSent, samples, maxQueue)
	for i, q := range maxQueue {
		assert.LessOrEqual(t, q, 5.0, "sidecar %d's queue stayed flat", i)
	}
}
