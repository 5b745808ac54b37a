// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build gpu && cgo

package nvmlreceiver

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.opentelemetry.io/collector/scraper/scrapererror"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/resusage"
	"github.com/gpubuild/otelcol-gpubuild/receiver/nvmlreceiver/internal/metadata"
)

// TestGPUSmoke runs the receiver against the machine's real NVML and GPUs
// (make gpu-smoke): the factory-built receiver for a few 1 s intervals,
// printing every metric, then timed direct scrapes. It fails when NVML
// cannot initialize, so run it only where a GPU and driver are present.
func TestGPUSmoke(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	set := receivertest.NewNopSettings(metadata.Type)
	set.Logger = zap.New(core)

	cfg := createDefaultConfig()
	cfg.CollectionInterval = time.Second
	cfg.InitialDelay = 0

	sink := new(consumertest.MetricsSink)
	rcv, err := NewFactory().CreateMetrics(context.Background(), set, cfg, sink)
	require.NoError(t, err)
	require.NoError(t, rcv.Start(context.Background(), componenttest.NewNopHost()))
	for _, e := range logs.All() {
		if e.Level >= zapcore.WarnLevel {
			_ = rcv.Shutdown(context.Background())
			t.Fatalf("NVML did not come up: %s %v", e.Message, e.ContextMap())
		}
	}
	require.Eventually(t, func() bool { return len(sink.AllMetrics()) >= 3 }, 15*time.Second, 50*time.Millisecond)
	require.NoError(t, rcv.Shutdown(context.Background()))

	all := sink.AllMetrics()
	last := all[len(all)-1]
	require.Positive(t, last.DataPointCount(), "a scrape on a GPU machine must produce metrics")
	fmt.Printf("=== receiver log\n")
	for _, e := range logs.All() {
		fmt.Printf("%s %s %v\n", e.Level.CapitalString(), e.Message, e.ContextMap())
	}
	fmt.Printf("=== last of %d scrapes at a 1 s interval: %d resources, %d data points\n",
		len(all), last.ResourceMetrics().Len(), last.DataPointCount())
	printMetrics(last)

	// Timed scrapes straight on the scraper: NVML latency plus Go work.
	s := newGPUScraper(cfg, set)
	require.NoError(t, s.start(context.Background(), componenttest.NewNopHost()))
	defer func() { require.NoError(t, s.shutdown(context.Background())) }()
	require.NotEmpty(t, s.gpus)
	const n = 20
	var total, worst time.Duration
	cpu0 := processCPU(t)
	for range n {
		start := time.Now()
		_, err := s.scrape(context.Background())
		d := time.Since(start)
		require.NoError(t, err)
		total += d
		worst = max(worst, d)
		time.Sleep(110 * time.Millisecond) // GPM wants 100 ms between two samples
	}
	cpu := processCPU(t) - cpu0
	fmt.Printf("=== %d direct scrapes of %d GPU(s): mean %v, max %v, mean per GPU %v; process CPU per scrape %v\n",
		n, len(s.gpus), total/n, worst, total/n/time.Duration(len(s.gpus)), cpu/n)
	timeSteps(t, s)
	printGPM(t, s)
	if v, ret := s.lib.SystemGetDriverVersion(); ret == nvml.SUCCESS {
		fmt.Printf("=== NVIDIA driver %s\n", v)
	}

	compareWithNvidiaSMI(t, s, 10*time.Second)
}

// timeSteps prints what each group of NVML queries costs on the first GPU:
// wall time and the CPU time of the calling thread, which is also the thread
// of the C call. The two differ where NVML waits (PCIe throughput is a
// sampled window).
func timeSteps(t *testing.T, s *gpuScraper) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	g := s.gpus[0]
	ts := pcommon.NewTimestampFromTime(time.Now())
	const n = 10
	fmt.Printf("=== NVML cost per scrape step on GPU %d, mean of %d calls\n", g.index, n)
	fmt.Printf("%-20s %14s %14s\n", "step", "wall", "thread CPU")
	for _, step := range gpuSteps {
		name := runtime.FuncForPC(reflect.ValueOf(step).Pointer()).Name()
		name = name[strings.LastIndex(name, ".")+1:]
		var errs scrapererror.ScrapeErrors
		cpu0 := threadCPU(t)
		start := time.Now()
		for range n {
			step(s, g, ts, &errs)
		}
		wall := time.Since(start) / n
		cpu := (threadCPU(t) - cpu0) / n
		if name == "recordGPM" {
			// GPM wants 100 ms between two samples; back to back, the
			// driver may refuse: printed, not judged.
			if err := errs.Combine(); err != nil {
				fmt.Printf("(GPM back to back: %v)\n", err)
			}
		} else {
			require.NoError(t, errs.Combine(), name)
		}
		s.mb.Emit() // the recorded points are not wanted
		fmt.Printf("%-20s %14v %14v\n", name, wall.Round(time.Microsecond), cpu.Round(time.Microsecond))
	}
	os.Stdout.Sync()
}

// printGPM prints the GPM metrics of each GPU and MIG instance over one
// 1 s interval, to hold against
// nvidia-smi dmon --gpm-metrics 2,3,5,10 -d 1 (SM activity, SM occupancy,
// any tensor activity, DRAM bandwidth, in percent), or says plainly that
// a GPU has no GPM.
func printGPM(t *testing.T, s *gpuScraper) {
	fmt.Printf("=== GPM (compare: nvidia-smi dmon --gpm-metrics 2,3,5,10 -d 1; percent there, fraction here)\n")
	if !s.sym.GPM {
		fmt.Printf("GPM not supported: the NVML library lacks the GPM entry points\n")
		return
	}
	// Errors are printed, not judged: this is for comparing by eye.
	if _, err := s.scrape(context.Background()); err != nil {
		fmt.Printf("scrape error: %v\n", err)
	}
	time.Sleep(time.Second)
	md, err := s.scrape(context.Background())
	if err != nil {
		fmt.Printf("scrape error: %v\n", err)
	}
	for _, g := range s.gpus {
		if g.gpm.off {
			fmt.Printf("GPU %d (%s, %s): GPM not supported on this GPU\n", g.index, g.model, g.uuid)
		}
	}
	names := []string{"gpu.sm.activity", "gpu.sm.occupancy", "gpu.tensor.activity", "gpu.dram.bandwidth.utilization"}
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		attrs := rm.Resource().Attributes()
		idx, _ := attrs.Get("gpu.index")
		where := fmt.Sprintf("GPU %d", idx.Int())
		if mig, ok := attrs.Get("gpu.mig.uuid"); ok {
			gi, _ := attrs.Get("gpu.mig.gpu_instance_id")
			where += fmt.Sprintf(" MIG %s (GPU instance %d)", mig.Str(), gi.Int())
		}
		var vals []string
		for _, name := range names {
			for j := 0; j < rm.ScopeMetrics().Len(); j++ {
				ms := rm.ScopeMetrics().At(j).Metrics()
				for k := 0; k < ms.Len(); k++ {
					if m := ms.At(k); m.Name() == name {
						vals = append(vals, fmt.Sprintf("%s=%.4f", name, m.Gauge().DataPoints().At(0).DoubleValue()))
					}
				}
			}
		}
		if len(vals) > 0 {
			fmt.Printf("%s: %s\n", where, strings.Join(vals, " "))
		}
	}
	os.Stdout.Sync()
}

// compareWithNvidiaSMI reports gpu.utilization averaged by the receiver over
// one interval beside the mean of nvidia-smi's readings every 100 ms over
// the same interval. It prints; it does not judge, because the two sample
// differently (NVML's ring buffer vs nvidia-smi's own instant readings).
func compareWithNvidiaSMI(t *testing.T, s *gpuScraper, interval time.Duration) {
	smi, err := exec.LookPath("nvidia-smi")
	if err != nil {
		fmt.Printf("=== utilization vs nvidia-smi: not compared, nvidia-smi is not on PATH\n")
		return
	}
	// A scrape marks the start: the next one averages the samples after it.
	_, err = s.scrape(context.Background())
	require.NoError(t, err)
	start := time.Now()
	var out strings.Builder
	cmd := exec.Command(smi, "--query-gpu=index,utilization.gpu", "--format=csv,noheader,nounits", "-lms", "100")
	cmd.Stdout = &out
	require.NoError(t, cmd.Start())
	time.Sleep(interval) // the interval being measured, not a wait for a condition
	md, err := s.scrape(context.Background())
	elapsed := time.Since(start)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	require.NoError(t, err)

	smiSum := map[int]float64{}
	smiN := map[int]int{}
	for _, line := range strings.Split(out.String(), "\n") {
		f := strings.Split(line, ",")
		if len(f) != 2 {
			continue
		}
		idx, err1 := strconv.Atoi(strings.TrimSpace(f[0]))
		v, err2 := strconv.ParseFloat(strings.TrimSpace(f[1]), 64)
		if err1 != nil || err2 != nil {
			continue
		}
		smiSum[idx] += v
		smiN[idx]++
	}
	fmt.Printf("=== gpu.utilization over one %.1f s interval vs nvidia-smi --query-gpu=utilization.gpu -lms 100 over the same interval\n", elapsed.Seconds())
	fmt.Printf("%-5s %-42s %16s %16s %10s %12s\n", "index", "uuid", "receiver (%)", "nvidia-smi (%)", "readings", "difference")
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		attrs := rm.Resource().Attributes()
		if _, mig := attrs.Get("gpu.mig.uuid"); mig {
			continue
		}
		idxVal, _ := attrs.Get("gpu.index")
		uuid, _ := attrs.Get("hw.id")
		idx := int(idxVal.Int())
		recv := "n/a"
		var recvPct float64
		haveRecv := false
		if m, ok := findMetric(rm, "hw.gpu.utilization"); ok && m.Gauge().DataPoints().Len() == 1 {
			recvPct, haveRecv = m.Gauge().DataPoints().At(0).DoubleValue()*100, true
			recv = fmt.Sprintf("%.1f", recvPct)
		}
		smiAvg := "n/a"
		diff := "n/a"
		if smiN[idx] > 0 {
			avg := smiSum[idx] / float64(smiN[idx])
			smiAvg = fmt.Sprintf("%.1f", avg)
			if haveRecv {
				diff = fmt.Sprintf("%+.1f pts", recvPct-avg)
			}
		}
		fmt.Printf("%-5d %-42s %16s %16s %10d %12s\n", idx, uuid.Str(), recv, smiAvg, smiN[idx], diff)
	}
	fmt.Println("(receiver: mean of NVML's GPU_UTILIZATION_SAMPLES taken during the interval; nvidia-smi: mean of its readings; run a GPU load during the test for a meaningful comparison)")
	os.Stdout.Sync()
}

func processCPU(t *testing.T) time.Duration {
	d, err := resusage.ProcessCPU()
	require.NoError(t, err)
	return d
}

func threadCPU(t *testing.T) time.Duration {
	d, err := resusage.ThreadCPU()
	require.NoError(t, err)
	return d
}

func printMetrics(md pmetric.Metrics) {
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		fmt.Printf("--- resource %s\n", formatAttrs(rm.Resource().Attributes()))
		var lines []string
		for j := 0; j < rm.ScopeMetrics().Len(); j++ {
			ms := rm.ScopeMetrics().At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				var dps pmetric.NumberDataPointSlice
				kind := m.Type().String()
				if m.Type() == pmetric.MetricTypeSum {
					dps = m.Sum().DataPoints()
					kind = fmt.Sprintf("Sum(monotonic=%v)", m.Sum().IsMonotonic())
				} else {
					dps = m.Gauge().DataPoints()
				}
				for p := 0; p < dps.Len(); p++ {
					dp := dps.At(p)
					var v string
					if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
						v = fmt.Sprint(dp.IntValue())
					} else {
						v = fmt.Sprintf("%g", dp.DoubleValue())
					}
					lines = append(lines, fmt.Sprintf("    %s %s [%s] %s = %s", m.Name(), kind, m.Unit(), formatAttrs(dp.Attributes()), v))
				}
			}
		}
		sort.Strings(lines)
		fmt.Println(strings.Join(lines, "\n"))
	}
	os.Stdout.Sync()
}

func formatAttrs(m pcommon.Map) string {
	parts := make([]string, 0, m.Len())
	for k, v := range m.All() {
		parts = append(parts, k+"="+v.AsString())
	}
	sort.Strings(parts)
	return "{" + strings.Join(parts, ", ") + "}"
}
