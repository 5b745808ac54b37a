// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

// Command nvmltiming times each NVML entry point the nvml receiver calls, on
// the first GPU: where a scrape's time and CPU go on real hardware, and what
// loading NVML adds to the process' memory. It needs an NVIDIA driver;
// `make gpu-smoke` runs the receiver itself.
package main

import (
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/resusage"
)

func timeit(name string, n int, f func() nvml.Return) {
	var total, worst time.Duration
	var ret nvml.Return
	cpu0 := threadCPU()
	for range n {
		t := time.Now()
		ret = f()
		d := time.Since(t)
		total += d
		worst = max(worst, d)
	}
	cpu := (threadCPU() - cpu0) / time.Duration(n)
	fmt.Printf("%-42s mean %10v  max %10v  cpu %10v  ret %v\n", name, total/time.Duration(n), worst, cpu, nvml.ErrorString(ret))
}

// threadCPU is the calling thread's CPU time. main locks its goroutine to
// the thread, so the C calls run there: the figure holds NVML's CPU (its
// ioctls included) and not its waits.
func threadCPU() time.Duration {
	d, _ := resusage.ThreadCPU()
	return d
}

// residentKiB reads RssAnon and RssFile of this process.
func residentKiB() (anon, file int64) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1, -1
	}
	return resusage.StatusKiB(string(b), "RssAnon:"), resusage.StatusKiB(string(b), "RssFile:")
}

func main() {
	runtime.LockOSThread()
	anon0, file0 := residentKiB()
	if r := nvml.Init(); r != nvml.SUCCESS {
		fmt.Fprintln(os.Stderr, "nvml:", nvml.ErrorString(r))
		os.Exit(1)
	}
	anon1, file1 := residentKiB()
	fmt.Printf("resident memory before nvml.Init: anonymous %d KiB, file %d KiB; after: %d KiB, %d KiB (+%d, +%d)\n",
		anon0, file0, anon1, file1, anon1-anon0, file1-file0)
	defer func() { _ = nvml.Shutdown() }()
	d, r := nvml.DeviceGetHandleByIndex(0)
	if r != nvml.SUCCESS {
		fmt.Fprintln(os.Stderr, "GPU 0:", nvml.ErrorString(r))
		return
	}
	const n = 10
	timeit("GetSamples(GPU_UTILIZATION)", n, func() nvml.Return { _, _, r := d.GetSamples(nvml.GPU_UTILIZATION_SAMPLES, 0); return r })
	timeit("GetUtilizationRates", n, func() nvml.Return { _, r := d.GetUtilizationRates(); return r })
	timeit("GetMemoryInfo_v2", n, func() nvml.Return { _, r := d.GetMemoryInfo_v2(); return r })
	timeit("GetTemperature", n, func() nvml.Return { _, r := d.GetTemperature(nvml.TEMPERATURE_GPU); return r })
	timeit("GetPowerUsage", n, func() nvml.Return { _, r := d.GetPowerUsage(); return r })
	timeit("GetEnforcedPowerLimit", n, func() nvml.Return { _, r := d.GetEnforcedPowerLimit(); return r })
	timeit("GetTotalEnergyConsumption", n, func() nvml.Return { _, r := d.GetTotalEnergyConsumption(); return r })
	timeit("GetClockInfo(SM)", n, func() nvml.Return { _, r := d.GetClockInfo(nvml.CLOCK_SM); return r })
	timeit("GetTotalEccErrors(corrected)", n, func() nvml.Return {
		_, r := d.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.VOLATILE_ECC)
		return r
	})
	timeit("GetCurrentClocksEventReasons", n, func() nvml.Return { _, r := d.GetCurrentClocksEventReasons(); return r })
	timeit("GetPcieThroughput(TX)", n, func() nvml.Return { _, r := d.GetPcieThroughput(nvml.PCIE_UTIL_TX_BYTES); return r })
	timeit("GetPcieThroughput(RX)", n, func() nvml.Return { _, r := d.GetPcieThroughput(nvml.PCIE_UTIL_RX_BYTES); return r })
	timeit("GetComputeRunningProcesses", n, func() nvml.Return { _, r := d.GetComputeRunningProcesses(); return r })
	timeit("GetProcessUtilization", n, func() nvml.Return { _, r := d.GetProcessUtilization(0); return r })
	timeit("GetMigMode", n, func() nvml.Return { _, _, r := d.GetMigMode(); return r })
	anon2, file2 := residentKiB()
	fmt.Printf("resident memory after the calls: anonymous %d KiB, file %d KiB\n", anon2, file2)
}
