// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlreceiver

import (
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpubuild/otelcol-gpubuild/receiver/nvmlreceiver/fakenvml"
)

// truth works out, scrape by scrape, what the receiver must report for a
// scenario: from the scenario and the script, never from receiver output.
type truth struct {
	sc       fakenvml.Scenario
	host     string
	now      time.Duration
	last     []uint64 // newest sample time a GPU's scrape consumed
	goneAt   []time.Duration
	gone     []bool
	xids     map[int]map[uint64]int
	xidsSeen int
}

func newTruth(t *testing.T, sc fakenvml.Scenario) *truth {
	host, err := os.Hostname()
	require.NoError(t, err)
	n := len(sc.GPUs)
	return &truth{sc: sc, host: host, last: make([]uint64, n), goneAt: make([]time.Duration, n), gone: make([]bool, n), xids: map[int]map[uint64]int{}}
}

func resourceKey(kv map[string]string) string {
	parts := make([]string, 0, len(kv))
	for k, v := range kv {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return "{" + strings.Join(parts, " ") + "}"
}

func pointKey(res, metric, unit string, attrs map[string]string) string {
	return res + " " + metric + "[" + unit + "]" + resourceKey(attrs)
}

func average(samples []fakenvml.Sample, after, upTo uint64) (float64, uint64, bool) {
	var sum float64
	var n int
	newest := after
	for _, s := range samples {
		if s.TimestampUs > after && s.TimestampUs <= upTo {
			sum += float64(s.Percent)
			n++
			newest = max(newest, s.TimestampUs)
		}
	}
	if n == 0 {
		return 0, after, false
	}
	return sum / float64(n), newest, true
}

// scrape returns the points of the next scrape after the state and clock
// of a step.
func (tr *truth) scrape(step childStep, retry time.Duration) map[string]float64 {
	tr.now += step.Advance
	clock := step.State.ClockUs
	if clock == 0 {
		clock = math.MaxUint64
	}
	for _, x := range step.State.XIDs[min(tr.xidsSeen, len(step.State.XIDs)):] {
		if tr.xids[x.GPU] == nil {
			tr.xids[x.GPU] = map[uint64]int{}
		}
		tr.xids[x.GPU][x.Code]++
	}
	tr.xidsSeen = max(tr.xidsSeen, len(step.State.XIDs))
	out := map[string]float64{}
	for i, g := range tr.sc.GPUs {
		if slices.Contains(step.State.Lost, i) {
			if !tr.gone[i] {
				tr.gone[i], tr.goneAt[i] = true, tr.now
			}
			continue
		}
		if tr.gone[i] {
			if tr.now-tr.goneAt[i] < retry {
				continue
			}
			tr.gone[i] = false
		}
		res := map[string]string{
			"hw.id": g.UUID, "hw.type": "gpu", "hw.vendor": "NVIDIA", "hw.model": g.Name, "hw.driver_version": tr.sc.Driver,
			"gpu.index": strconv.Itoa(i), "gpu.pci.bus_id": g.BusID, "host.name": tr.host,
		}
		rk := resourceKey(res)
		put := func(rk, metric, unit string, v float64, attrs ...string) {
			a := map[string]string{}
			for j := 0; j+1 < len(attrs); j += 2 {
				a[attrs[j]] = attrs[j+1]
			}
			out[pointKey(rk, metric, unit, a)] = v
		}
		prev := tr.last[i]
		if !g.MIGMode {
			util, newest, ok := average(g.GPUSamples, prev, clock)
			if !ok {
				util = float64(g.UtilGPU)
			}
			tr.last[i] = newest
			put(rk, mUtilization, "1", util/100, "hw.gpu.task", "general")
			mem, _, ok := average(g.MemSamples, prev, clock)
			if !ok {
				mem = float64(g.UtilMem)
			}
			put(rk, mMemController, "1", mem/100)
		}
		put(rk, mMemUsage, "By", float64(g.MemUsed))
		put(rk, mMemReserved, "By", float64(g.MemReserved))
		put(rk, mMemLimit, "By", float64(g.MemTotal))
		put(rk, mMemUtilization, "1", float64(g.MemUsed)/float64(g.MemTotal))
		put(rk, mTemperature, "Cel", float64(g.Temperature))
		if !g.PowerUnsupported {
			put(rk, mPower, "W", float64(g.PowerMW)/1000)
			put(rk, mPowerLimit, "W", float64(g.PowerLimitMW)/1000)
			put(rk, mEnergy, "J", float64(g.EnergyMJ)/1000)
		}
		put(rk, mClock, "Hz", float64(g.ClockSM)*1e6, "gpu.clock.type", "sm")
		put(rk, mClock, "Hz", float64(g.ClockMem)*1e6, "gpu.clock.type", "memory")
		put(rk, mClock, "Hz", float64(g.ClockGraphics)*1e6, "gpu.clock.type", "graphics")
		if !g.ECCUnsupported {
			put(rk, mECC, "{error}", float64(g.ECCCorrected), "error.type", "corrected")
			put(rk, mECC, "{error}", float64(g.ECCUncorrected), "error.type", "uncorrected")
		}
		for _, r := range throttleNames {
			if g.ThrottleSupported&r.bit != 0 {
				v := 0.0
				if g.ThrottleCurrent&r.bit != 0 {
					v = 1
				}
				put(rk, mThrottled, "1", v, "gpu.clock.throttle_reason", r.name)
			}
		}
		put(rk, mPCIe, "By/s", float64(g.PCIeTXKiB)*1024, "network.io.direction", "transmit")
		put(rk, mPCIe, "By/s", float64(g.PCIeRXKiB)*1024, "network.io.direction", "receive")
		for code, n := range tr.xids[i] {
			put(rk, mXID, "{error}", float64(n), "gpu.xid", strconv.FormatUint(code, 10))
		}
		procAttrs := func(pid uint32) []string {
			comm, _, cid := procEntry(pid)
			return []string{"process.pid", strconv.Itoa(int(pid)), "process.executable.name", comm, "container.id", cid}
		}
		if !g.MIGMode {
			for _, p := range g.Processes {
				put(rk, mProcMemory, "By", float64(p.UsedBytes), procAttrs(p.PID)...)
				var sum, n float64
				for _, s := range g.ProcessSamples {
					if s.PID == p.PID && s.TimestampUs > prev && s.TimestampUs <= clock {
						sum += float64(s.SMPercent)
						n++
					}
				}
				util := 0.0
				if n > 0 {
					util = sum / n / 100
				}
				put(rk, mProcUtil, "1", util, procAttrs(p.PID)...)
			}
			continue
		}
		for _, m := range g.MIG {
			mres := map[string]string{"gpu.mig.uuid": m.UUID, "gpu.mig.gpu_instance_id": strconv.Itoa(int(m.GPUInstanceID)),
				"gpu.mig.compute_instance_id": strconv.Itoa(int(m.ComputeID))}
			for k, v := range res {
				mres[k] = v
			}
			mk := resourceKey(mres)
			put(mk, mMemUsage, "By", float64(m.MemUsed))
			put(mk, mMemReserved, "By", float64(m.MemReserv))
			put(mk, mMemLimit, "By", float64(m.MemTotal))
			put(mk, mMemUtilization, "1", float64(m.MemUsed)/float64(m.MemTotal))
			for _, p := range m.Processes {
				put(mk, mProcMemory, "By", float64(p.UsedBytes), procAttrs(p.PID)...)
			}
		}
	}
	return out
}

// flatten turns the receiver's output into the same keys.
func flatten(t *testing.T, md pmetric.Metrics) map[string]float64 {
	t.Helper()
	str := func(m pcommon.Map) map[string]string {
		kv := map[string]string{}
		for k, v := range m.All() {
			kv[k] = v.AsString()
		}
		return kv
	}
	out := map[string]float64{}
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		rk := resourceKey(str(rm.Resource().Attributes()))
		for j := 0; j < rm.ScopeMetrics().Len(); j++ {
			ms := rm.ScopeMetrics().At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				dps := dataPoints(m)
				for p := 0; p < dps.Len(); p++ {
					dp := dps.At(p)
					v := dp.DoubleValue()
					if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
						v = float64(dp.IntValue())
					}
					key := pointKey(rk, m.Name(), m.Unit(), str(dp.Attributes()))
					if _, dup := out[key]; dup {
						t.Errorf("point reported twice: %s", key)
					}
					out[key] = v
				}
			}
		}
	}
	return out
}

// diffPoints lists every difference between the truth and what came out.
func diffPoints(want, got map[string]float64) []string {
	var diffs []string
	for k, w := range want {
		g, ok := got[k]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("missing %s (want %v)", k, w))
		case math.Abs(g-w) > 1e-9*math.Max(1, math.Abs(w)):
			diffs = append(diffs, fmt.Sprintf("wrong %s: got %v, want %v", k, g, w))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("unexpected %s = %v", k, g))
		}
	}
	sort.Strings(diffs)
	return diffs
}
