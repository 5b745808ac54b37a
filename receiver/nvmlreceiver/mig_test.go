// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlreceiver

import (
	"fmt"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// enableMIG partitions a mocked A100 into the given GPU instance profiles,
// one compute instance each, with dgxa100's MIG model, and exposes them as
// MIG device handles the way NVML does. procs lists the processes per MIG
// device.
func enableMIG(t *testing.T, d *dgxa100.Device, profiles []int, procs [][]nvml.ProcessInfo) []*mock.Device {
	t.Helper()
	_, ret := d.SetMigMode(nvml.DEVICE_MIG_ENABLE)
	require.Equal(t, nvml.SUCCESS, ret)
	var migs []*mock.Device
	for k, p := range profiles {
		giInfo, ret := d.GetGpuInstanceProfileInfo(p)
		require.Equal(t, nvml.SUCCESS, ret)
		gi, ret := d.CreateGpuInstance(&giInfo)
		require.Equal(t, nvml.SUCCESS, ret)
		ciInfo, ret := gi.GetComputeInstanceProfileInfo(nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
		require.Equal(t, nvml.SUCCESS, ret)
		ci, ret := gi.CreateComputeInstance(&ciInfo)
		require.Equal(t, nvml.SUCCESS, ret)
		giID := int(gi.(*dgxa100.GpuInstance).Info.Id)
		ciID := int(ci.(*dgxa100.ComputeInstance).Info.Id)
		memBytes := giInfo.MemorySizeMB << 20
		used := uint64(k+1) << 30
		p := procs[k]
		migs = append(migs, &mock.Device{
			GetUUIDFunc:          func() (string, nvml.Return) { return fmt.Sprintf("MIG-%s-%d", d.UUID, k), nvml.SUCCESS },
			GetGpuInstanceIdFunc: func() (int, nvml.Return) { return giID, nvml.SUCCESS },
			GetComputeInstanceIdFunc: func() (int, nvml.Return) {
				return ciID, nvml.SUCCESS
			},
			GetMemoryInfo_v2Func: func() (nvml.Memory_v2, nvml.Return) {
				return nvml.Memory_v2{Total: memBytes, Used: used, Free: memBytes - used}, nvml.SUCCESS
			},
			GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) { return p, nvml.SUCCESS },
		})
	}
	d.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 7, nvml.SUCCESS }
	d.GetMigDeviceHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if i < len(migs) {
			return migs[i], nvml.SUCCESS
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
	// What NVML answers on a GPU in MIG mode.
	d.GetSamplesFunc = func(nvml.SamplingType, uint64) (nvml.ValueType, []nvml.Sample, nvml.Return) {
		return 0, nil, nvml.ERROR_NOT_SUPPORTED
	}
	d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, nvml.ERROR_NOT_SUPPORTED }
	d.GetProcessUtilizationFunc = func(uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
		return nil, nvml.ERROR_NOT_SUPPORTED
	}
	d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		t.Error("in MIG mode processes are read per MIG device")
		return nil, nvml.ERROR_UNKNOWN
	}
	return migs
}

func TestMIGInstances(t *testing.T) {
	srv := newMockServer()
	d0 := gpu(srv, 0)
	enableMIG(t, d0,
		[]int{nvml.GPU_INSTANCE_PROFILE_3_SLICE, nvml.GPU_INSTANCE_PROFILE_1_SLICE},
		[][]nvml.ProcessInfo{{{Pid: 2001, UsedGpuMemory: 700 << 20}}, nil})
	env := newTestEnv(t, defaultTestConfig(), loaderOf(srv))
	env.addProcess(t, 2001, "builder", "0::/system.slice/docker-"+idA+".scope\n")

	md, err := env.scrape(t)
	require.NoError(t, err)
	require.Equal(t, 8+2, md.ResourceMetrics().Len(), "8 GPUs and 2 MIG devices")

	// The parent keeps what NVML still answers in MIG mode.
	parent := resourceFor(t, md, map[string]any{"hw.id": d0.UUID, "gpu.index": int64(0), "gpu.mig.uuid": nil})
	_, hasMIGAttr := parent.Resource().Attributes().Get("gpu.mig.uuid")
	assert.False(t, hasMIGAttr)
	assert.Equal(t, 40.0, point(t, parent, "hw.temperature", nil))
	assert.Equal(t, float64(40<<30), point(t, parent, "hw.gpu.memory.limit", nil))
	_, has := findMetric(parent, "hw.gpu.utilization")
	assert.False(t, has, "NVML has no utilization in MIG mode")
	_, has = findMetric(parent, "gpu.process.memory.usage")
	assert.False(t, has)

	// dgxa100 profiles: 3g.20gb has 19968 MiB (id 0), 1g.5gb 4864 MiB (id 1).
	mig0 := resourceFor(t, md, map[string]any{"gpu.mig.uuid": "MIG-" + d0.UUID + "-0"})
	attrs := mig0.Resource().Attributes().AsRaw()
	assert.Equal(t, d0.UUID, attrs["hw.id"])
	assert.Equal(t, int64(0), attrs["gpu.index"])
	assert.Equal(t, int64(0), attrs["gpu.mig.gpu_instance_id"])
	assert.Equal(t, int64(0), attrs["gpu.mig.compute_instance_id"])
	assert.Equal(t, float64(19968<<20), point(t, mig0, "hw.gpu.memory.limit", nil))
	assert.Equal(t, float64(1<<30), point(t, mig0, "hw.gpu.memory.usage", nil))
	assert.Equal(t, float64(700<<20), point(t, mig0, "gpu.process.memory.usage",
		map[string]any{"process.pid": int64(2001), "process.executable.name": "builder", "container.id": idA}))
	_, has = findMetric(mig0, "gpu.process.utilization")
	assert.False(t, has, "NVML has no per-process utilization on MIG devices")

	mig1 := resourceFor(t, md, map[string]any{"gpu.mig.gpu_instance_id": int64(1)})
	assert.Equal(t, float64(4864<<20), point(t, mig1, "hw.gpu.memory.limit", nil))
	_, has = findMetric(mig1, "gpu.process.memory.usage")
	assert.False(t, has)

	// Other GPUs are unaffected.
	assert.InDelta(t, 0.21, point(t, resourceFor(t, md, map[string]any{"gpu.index": int64(1)}), "hw.gpu.utilization", nil), 1e-9)
}
