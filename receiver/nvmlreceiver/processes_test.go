// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlreceiver

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPerProcessMetrics(t *testing.T) {
	srv := newMockServer()
	d := gpu(srv, 0)
	procs := []nvml.ProcessInfo{
		{Pid: 1001, UsedGpuMemory: 3 << 30},
		{Pid: 1002, UsedGpuMemory: 1 << 30},
		{Pid: 1003, UsedGpuMemory: 512 << 20},
		{Pid: 1004, UsedGpuMemory: 256 << 20}, // exited before /proc was read
		{Pid: 1005, UsedGpuMemory: memoryNotAvailable},
	}
	d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return procs, nvml.SUCCESS }
	var lastSeen []uint64
	samples := []nvml.ProcessUtilizationSample{
		{Pid: 1001, TimeStamp: 10, SmUtil: 20},
		{Pid: 1001, TimeStamp: 20, SmUtil: 40},
		{Pid: 1003, TimeStamp: 15, SmUtil: 60},
		{Pid: 1003, TimeStamp: 5, SmUtil: 99}, // older than lastSeen on the second scrape
	}
	d.GetProcessUtilizationFunc = func(last uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
		lastSeen = append(lastSeen, last)
		return samples, nvml.SUCCESS
	}
	cfg := defaultTestConfig()
	cfg.Devices = []string{"0"}
	env := newTestEnv(t, cfg, loaderOf(srv))
	env.addProcess(t, 1001, "python3", "12:memory:/docker/"+idA+"\n")
	env.addProcess(t, 1002, "faiss_build", "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/cri-containerd-"+idB+".scope\n")
	env.addProcess(t, 1003, "nvidia-smi", "0::/user.slice/user-1000.slice/session-2.scope\n")
	env.addProcess(t, 1005, "hidden", "0::/\n")

	md, err := env.scrape(t)
	require.NoError(t, err)
	rm := md.ResourceMetrics().At(0)
	p1 := map[string]any{"process.pid": int64(1001), "process.executable.name": "python3", "container.id": idA}
	p2 := map[string]any{"process.pid": int64(1002), "process.executable.name": "faiss_build", "container.id": idB}
	p3 := map[string]any{"process.pid": int64(1003), "process.executable.name": "nvidia-smi", "container.id": ""}
	assert.Equal(t, float64(3<<30), point(t, rm, "gpu.process.memory.usage", p1))
	assert.Equal(t, float64(1<<30), point(t, rm, "gpu.process.memory.usage", p2))
	assert.Equal(t, float64(512<<20), point(t, rm, "gpu.process.memory.usage", p3))
	// First scrape: every sample; 1001 averages (20+40)/2, 1003 (60+99)/2,
	// 1002 has none and used no SM time.
	assert.InDelta(t, 0.30, point(t, rm, "gpu.process.utilization", p1), 1e-9)
	assert.InDelta(t, 0.0, point(t, rm, "gpu.process.utilization", p2), 1e-9)
	assert.InDelta(t, 0.795, point(t, rm, "gpu.process.utilization", p3), 1e-9)

	mem, _ := findMetric(rm, "gpu.process.memory.usage")
	assert.Equal(t, 3, mem.Sum().DataPoints().Len(), "1004 vanished, 1005 has no memory figure")
	util, _ := findMetric(rm, "gpu.process.utilization")
	assert.Equal(t, 4, util.Gauge().DataPoints().Len(), "1005 still has a utilization")
	assert.Equal(t, "By", mem.Unit())
	assert.Equal(t, "1", util.Unit())

	// Second scrape: only samples after timestamp 20 count; 1001 exits.
	samples = append(samples, nvml.ProcessUtilizationSample{Pid: 1003, TimeStamp: 30, SmUtil: 10})
	procs = procs[1:3]
	env.removeProcess(t, 1001)
	md, err = env.scrape(t)
	require.NoError(t, err)
	rm = md.ResourceMetrics().At(0)
	assert.InDelta(t, 0.10, point(t, rm, "gpu.process.utilization", p3), 1e-9)
	mem, _ = findMetric(rm, "gpu.process.memory.usage")
	assert.Equal(t, 2, mem.Sum().DataPoints().Len())
	assert.Equal(t, []uint64{0, 20}, lastSeen)
	assert.Equal(t, 1, countLogs(env.logs, "a GPU process is not visible under /proc"))
}

func TestPerProcessOff(t *testing.T) {
	srv := newMockServer()
	for i := range 8 {
		gpu(srv, i).GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
			t.Error("processes listed although per_process is false")
			return nil, nvml.ERROR_UNKNOWN
		}
	}
	cfg := defaultTestConfig()
	cfg.PerProcess = false
	env := newTestEnv(t, cfg, loaderOf(srv))
	md, err := env.scrape(t)
	require.NoError(t, err)
	_, has := findMetric(md.ResourceMetrics().At(0), "gpu.process.memory.usage")
	assert.False(t, has)
}

func TestProcessUtilizationNotSupported(t *testing.T) {
	srv := newMockServer()
	d := gpu(srv, 0)
	d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		return []nvml.ProcessInfo{{Pid: 7, UsedGpuMemory: 100}}, nvml.SUCCESS
	}
	d.GetProcessUtilizationFunc = func(uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
		return nil, nvml.ERROR_NOT_SUPPORTED
	}
	cfg := defaultTestConfig()
	cfg.Devices = []string{"0"}
	env := newTestEnv(t, cfg, loaderOf(srv))
	env.addProcess(t, 7, "worker", "0::/\n")
	for range 2 {
		md, err := env.scrape(t)
		require.NoError(t, err)
		rm := md.ResourceMetrics().At(0)
		assert.Equal(t, 100.0, point(t, rm, "gpu.process.memory.usage", map[string]any{"process.pid": int64(7)}))
		_, has := findMetric(rm, "gpu.process.utilization")
		assert.False(t, has)
	}
	assert.Equal(t, 1, countLogs(env.logs, "GPU does not support a metric"))
}
