// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"math"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/buildsim"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
)

func TestParseStatCPU(t *testing.T) {
	// A command name with spaces and a parenthesis, as the kernel prints it.
	stat := "4242 (otel col) x) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 75 0 0 20 0 12 0 100 1000000 2000 18446744073709551615"
	got, err := parseStatCPU(stat)
	require.NoError(t, err)
	assert.Equal(t, 3.25, got, "(250+75) ticks at 100 Hz")
	_, err = parseStatCPU("garbage")
	assert.Error(t, err)
}

func TestLowerBound(t *testing.T) {
	t1, t2 := time.Unix(100, 0), time.Unix(101, 0)
	var datums []cloudwatchtest.Datum
	for range 2500 {
		datums = append(datums, cloudwatchtest.Datum{Timestamp: t1})
	}
	for range 1000 {
		datums = append(datums, cloudwatchtest.Datum{Timestamp: t2})
	}
	datums = append(datums, cloudwatchtest.Datum{Timestamp: time.Unix(102, 0)})
	assert.Equal(t, 3+1+1, lowerBound(datums))
	assert.Zero(t, lowerBound(nil))
}

func TestSimConfigMatchesTheLoad(t *testing.T) {
	cfg := simConfig(load{points: 10000, jobs: 100, interval: time.Second, duration: time.Minute}, "127.0.0.1:4317")
	require.NoError(t, cfg.Validate())
	assert.Equal(t, 6000, cfg.Jobs)
	assert.Equal(t, 100.0, cfg.Rate)
	// Three instruments: their extra series plus the jobs' own series make
	// up the points of one export per second.
	jobSeries := len(cfg.Engines)*cfg.Tenants + len(cfg.Engines)*len(cfg.DataTypes) + cfg.GPUs
	assert.InDelta(t, 10000, 3*cfg.MetricSeries+jobSeries, 3)

	// Four times the rate: as many series, exported four times as often.
	fast := simConfig(load{points: 40000, jobs: 400, interval: time.Second / 4, duration: time.Minute}, "127.0.0.1:4317")
	assert.Equal(t, cfg.MetricSeries, fast.MetricSeries)
	assert.Equal(t, 250*time.Millisecond, fast.MetricInterval)
	assert.Equal(t, 24000, fast.Jobs)
}

func TestParseSmapsFileRSS(t *testing.T) {
	smaps := `00400000-02000000 r-xp 00000000 08:01 1234 /opt/otelcol-gpubuild
Size:              28672 kB
Rss:               17000 kB
02000000-03000000 r--p 01c00000 08:01 1234 /opt/otelcol-gpubuild
Rss:               18000 kB
c000000000-c004000000 rw-p 00000000 00:00 0
Rss:               50000 kB
7f0000000000-7f0000400000 r--s 00000000 08:01 99 /var/lib/otelcol-gpubuild/queue/exporter_cloudwatch__cumulative_state
Rss:                3800 kB
7f1000000000-7f1000200000 r-xp 00000000 08:01 77 /usr/lib/x86_64-linux-gnu/libc.so.6
Rss:                 900 kB
7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0                          [stack]
Rss:                  40 kB
`
	bin, other := parseSmapsFileRSS(smaps, "/opt/otelcol-gpubuild")
	assert.Equal(t, int64(35000), bin)
	assert.Equal(t, int64(4700), other, "state file and library; anonymous mappings left out")
}

func TestDeliveryLineNamesEveryInexactRun(t *testing.T) {
	sim := &buildsim.Summary{Generated: buildsim.Totals{Jobs: []buildsim.Series{{Count: 30}, {Count: 12}}}}
	sim.SDKMetrics.Counter.Total = 500
	run := func(jobs, counter float64) peerRun {
		return peerRun{delivery: &result{cw: true, sim: sim, jobsLanded: jobs, counterLanded: counter}}
	}
	loads := []peerLoad{{name: "base"}, {name: "spans only"}}

	all := map[string][]peerRun{"base": {run(42, 500), run(42, 500)}, "spans only": {run(42, 500)}}
	require.Equal(t, "\nDelivery exact for ours (every derived build.jobs and the SDK counter's total landed at the CloudWatch test endpoint): 3 of 3 runs.\n",
		deliveryLine("ours", loads, all))

	some := map[string][]peerRun{"base": {run(42, 500), run(41, 500)}, "spans only": {run(42, 499)}}
	require.Equal(t, "\nDelivery exact for ours (every derived build.jobs and the SDK counter's total landed at the CloudWatch test endpoint): 1 of 3 runs; "+
		"not exact: base, round 2: build.jobs 41 of 42, counter 500 of 500; spans only, round 1: build.jobs 42 of 42, counter 499 of 500.\n",
		deliveryLine("ours", loads, some))

	require.Empty(t, deliveryLine("contrib", loads, map[string][]peerRun{"base": {{cores: 0.1}}}), "a peer without the test endpoint has no line")
}

func TestWithoutStateBlocksKeepsTheRest(t *testing.T) {
	cfg := `connectors:
  buildjob:
    job_timeout: 30m
    state: &s
      storage: file_storage/queue
      journal:
        directory: /q

        fsync: false
processors:
  buildjob:
    state: *s
exporters:
  cloudwatch:
    cumulative_state:
      storage: file_storage/queue
    # kept
    metrics: []
`
	got, removed := withoutStateBlocks(cfg)
	assert.Equal(t, 3, removed)
	assert.Equal(t, `connectors:
  buildjob:
    job_timeout: 30m
processors:
  buildjob:
exporters:
  cloudwatch:
    # kept
    metrics: []
`, got)
}

func TestSpreadAndRatioCell(t *testing.T) {
	s := spreadOf([]float64{0.9, math.NaN(), 0.7, 1.1})
	assert.Equal(t, spread{0.9, 0.7, 1.1}, s, "NaN (a round without the figure) left out")
	assert.Equal(t, "0.90 (0.70–1.10)", s.format("%.2f"))
	assert.Equal(t, "2.0", spreadOf([]float64{2, 2.01}).format("%.1f"), "no range where it does not show")
	assert.True(t, math.IsNaN(spreadOf(nil).med))

	// Rounds are paired: ours 1.0, 1.4 against contrib 2.0, 2.0.
	r := pairedRatios([]float64{1.0, 1.4, 3}, []float64{2.0, 2.0, 0})
	assert.InDeltaSlice(t, []float64{0.5, 0.7}, r, 1e-9, "a round contrib did not measure is left out")
	assert.Equal(t, "0.60 (0.50–0.70)×", ratioCell(r, 0), "under 1 in every round; two rounds' median is their mean")
	assert.Equal(t, "0.60 (0.50–0.70)×", ratioCell(r, 0.8), "under the goal in every round")
	assert.Equal(t, "0.75 (0.70–0.90)×, within noise of 0.8×", ratioCell([]float64{0.7, 0.75, 0.9}, 0.8))
	assert.Equal(t, "1.00 (0.85–1.15)×, within noise of 1", ratioCell([]float64{0.85, 1.0, 1.15}, 0.8))
	assert.Equal(t, "0.90 (0.75–1.05)×, within noise of 1 and 0.8×", ratioCell([]float64{0.75, 0.9, 1.05}, 0.8))
	assert.Equal(t, "1.00×", ratioCell([]float64{1}, 0), "one round: no spread to judge by")
	assert.Equal(t, "–", ratioCell(nil, 0))
}

func TestPinCPU(t *testing.T) {
	assert.Empty(t, pinCPU("off"))
	assert.Equal(t, "0,1", pinCPU("0,1"))
	got := pinCPU("auto")
	if _, err := exec.LookPath("taskset"); err != nil || runtime.NumCPU() < 2 {
		assert.Empty(t, got)
	} else {
		assert.Equal(t, strconv.Itoa(runtime.NumCPU()-1), got)
	}
}

func TestSchedStatCountsThisProcess(t *testing.T) {
	before, err := readSchedStat(os.Getpid())
	require.NoError(t, err)
	start := time.Now()
	for time.Since(start) < 50*time.Millisecond { //nolint:revive // spin: CPU to be counted
	}
	runtime.Gosched()
	after, err := readSchedStat(os.Getpid())
	require.NoError(t, err)
	assert.Greater(t, after.seconds-before.seconds, 0.02, "50 ms of spinning is counted")
	assert.Greater(t, after.timeslices, uint64(0), "the threads' timeslices are read")
}
