//go:build cgo

// Command nvmltiming times each NVML entry point the nvml receiver calls, on
// the first GPU: where a scrape's time and CPU go on real hardware, and what
// loading NVML adds to the process' memory. It needs an NVIDIA driver;
// `make gpu-smoke` runs the receiver itself.
package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
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

// threadCPU is the CPU time of the calling thread (getrusage RUSAGE_THREAD,
// Linux). main locks its goroutine to the thread, so the C calls run there:
// the figure holds NVML's CPU (its ioctls included) and not its waits.
func threadCPU() time.Duration {
	const rusageThread = 1
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// residentKiB reads RssAnon and RssFile of this process.
func residentKiB() (anon, file int64) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return -1, -1
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "RssAnon":
			anon = n
		case "RssFile":
			file = n
		}
	}
	return anon, file
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
