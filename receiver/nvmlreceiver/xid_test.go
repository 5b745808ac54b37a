// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlreceiver

import (
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

func xidPoints(t *testing.T, md pmetric.Metrics, gpuIndex int) map[int64]int64 {
	t.Helper()
	rm := resourceFor(t, md, map[string]any{"gpu.index": int64(gpuIndex)})
	out := map[int64]int64{}
	m, ok := findMetric(rm, "gpu.xid.errors")
	if !ok {
		return out
	}
	require.Equal(t, "{error}", m.Unit())
	require.True(t, m.Sum().IsMonotonic())
	for i := 0; i < m.Sum().DataPoints().Len(); i++ {
		dp := m.Sum().DataPoints().At(i)
		xid, _ := dp.Attributes().Get("gpu.xid")
		out[xid.Int()] = dp.IntValue()
	}
	return out
}

func TestXIDErrorsAreCountedPerGPUAndCode(t *testing.T) {
	srv := newMockServer()
	events := newMockEventSet()
	creates := 0
	srv.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { creates++; return events, nvml.SUCCESS }
	registered := 0
	for i := range 8 {
		d := gpu(srv, i)
		d.RegisterEventsFunc = func(types uint64, set nvml.EventSet) nvml.Return {
			assert.Equal(t, uint64(nvml.EventTypeXidCriticalError), types)
			assert.Same(t, events, set)
			if i == 7 {
				return nvml.ERROR_NOT_SUPPORTED
			}
			registered++
			return nvml.SUCCESS
		}
	}
	cfg := createDefaultConfig() // gpu.xid.errors is on by default
	env := newTestEnv(t, cfg, loaderOf(srv))
	assert.Equal(t, 1, creates, "one event set for all GPUs")
	assert.Equal(t, 7, registered)

	md, err := env.scrape(t)
	require.NoError(t, err)
	assert.Empty(t, xidPoints(t, md, 3), "no XID yet: nothing reported")

	xid := func(i int, code uint64) nvml.EventData {
		return nvml.EventData{Device: srv.Devices[i], EventType: nvml.EventTypeXidCriticalError, EventData: code}
	}
	events.events <- xid(3, 79)
	events.events <- xid(3, 13)
	events.events <- xid(3, 79)
	events.events <- xid(5, 48)
	events.events <- nvml.EventData{Device: srv.Devices[5], EventType: nvml.EventTypePState} // not an XID
	require.Eventually(t, func() bool { return len(events.events) == 0 }, 2*time.Second, 5*time.Millisecond)

	require.Eventually(t, func() bool {
		md, err = env.scrape(t)
		require.NoError(t, err)
		return xidPoints(t, md, 5)[48] == 1 && xidPoints(t, md, 3)[79] == 2
	}, 2*time.Second, 5*time.Millisecond)
	assert.Equal(t, map[int64]int64{13: 1, 79: 2}, xidPoints(t, md, 3))
	assert.Equal(t, map[int64]int64{48: 1}, xidPoints(t, md, 5))
	assert.Empty(t, xidPoints(t, md, 0))

	// Counts are cumulative.
	events.events <- xid(3, 13)
	require.Eventually(t, func() bool {
		md, err = env.scrape(t)
		require.NoError(t, err)
		return xidPoints(t, md, 3)[13] == 2
	}, 2*time.Second, 5*time.Millisecond)
	assert.Equal(t, 1, countLogs(env.logs, "GPU cannot report XID events"))
	// Shutdown (in cleanup) stops the event loop; goleak checks it.
}

func TestXIDDisabledStartsNoWatcher(t *testing.T) {
	srv := newMockServer()
	srv.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) {
		t.Error("event set created although gpu.xid.errors is disabled")
		return nil, nvml.ERROR_UNKNOWN
	}
	env := newTestEnv(t, defaultTestConfig(), loaderOf(srv))
	assert.Nil(t, env.scraper.xid)
}
