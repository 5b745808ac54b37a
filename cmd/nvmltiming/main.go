//go:build cgo

// Command nvmltiming times each NVML entry point the nvml receiver calls, on
// the first GPU: where a scrape's time goes on real hardware. It needs an
// NVIDIA driver; `make gpu-smoke` runs the receiver itself.
package main

import (
	"fmt"
	"os"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

func timeit(name string, n int, f func() nvml.Return) {
	var total, worst time.Duration
	var ret nvml.Return
	for range n {
		t := time.Now()
		ret = f()
		d := time.Since(t)
		total += d
		worst = max(worst, d)
	}
	fmt.Printf("%-42s mean %10v  max %10v  ret %v\n", name, total/time.Duration(n), worst, nvml.ErrorString(ret))
}

func main() {
	if r := nvml.Init(); r != nvml.SUCCESS {
		fmt.Fprintln(os.Stderr, "nvml:", nvml.ErrorString(r))
		os.Exit(1)
	}
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
}
