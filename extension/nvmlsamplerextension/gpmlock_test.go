// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlsamplerextension

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.uber.org/zap"

	"github.com/gpubuild/otelcol-gpubuild/internal/nvmlapi"
	"github.com/gpubuild/otelcol-gpubuild/receiver/nvmlreceiver"
	"github.com/gpubuild/otelcol-gpubuild/receiver/nvmlreceiver/fakenvml"
)

type extensionHost map[component.ID]component.Component

func (h extensionHost) GetExtensions() map[component.ID]component.Component { return h }

// TestSharedSessionSerializesGPM: the nvml receiver scraping through the
// sampler's session and the sampler itself both take GPM samples of the
// same GPU, every 2 ms for a second; the fake NVML counts GPM calls that
// found another under way (a real driver's GPM is not safe to call from
// several threads: this crashed the sidecar on an H200). None may.
func TestSharedSessionSerializesGPM(t *testing.T) {
	dir := t.TempDir()
	sc := fakenvml.Scenario{Driver: "550.54.15", Realtime: true, GPUs: []fakenvml.GPU{{
		UUID: "GPU-c0570000-0000-4000-8000-000000000000", Name: "NVIDIA H100 80GB HBM3", BusID: "00000000:18:00.0",
		MemTotal: 80 << 30, EnergyMJ: 1_000_000, GPM: fakenvml.GPMOn,
		GPMSteps: []fakenvml.GPMStep{{GPUInstance: -1, FromUs: 0, Values: [4]float64{40, 50, 30, 20}}},
	}}}
	scPath := filepath.Join(dir, "scenario.txt")
	require.NoError(t, sc.WriteFile(scPath))
	report := filepath.Join(dir, "report.txt")
	t.Setenv(fakenvml.EnvScenario, scPath)
	t.Setenv(fakenvml.EnvState, filepath.Join(dir, "no-state.txt"))
	t.Setenv(fakenvml.EnvReport, report)
	fakeLib, err := fakeLibrary()
	require.NoError(t, err)

	cfg := createDefaultConfig()
	cfg.SamplingInterval = 2 * time.Millisecond
	s := newSamplerWith(cfg, zap.NewNop(), nvmlapi.NewSystemLoader(nvml.WithLibraryPath(fakeLib)), time.Now)
	require.NoError(t, s.Start(t.Context(), nil))
	id := component.MustNewID("nvml_sampler")

	rf := nvmlreceiver.NewFactory()
	rcfg := rf.CreateDefaultConfig().(*nvmlreceiver.Config)
	rcfg.CollectionInterval = 2 * time.Millisecond
	rcfg.NVMLSession = &id
	sink := new(consumertest.MetricsSink)
	rcv, err := rf.CreateMetrics(t.Context(), receivertest.NewNopSettings(rf.Type()), rcfg, sink)
	require.NoError(t, err)
	require.NoError(t, rcv.Start(t.Context(), extensionHost{id: s}))

	// The two sample on their own tickers meanwhile.
	deadline := time.Now().Add(time.Second)
	require.Eventually(t, func() bool { return time.Now().After(deadline) && sink.DataPointCount() > 0 },
		10*time.Second, 10*time.Millisecond, "the receiver scrapes through the shared session")
	require.NoError(t, rcv.Shutdown(t.Context()))
	require.NoError(t, s.Shutdown(t.Context())) // the session's nvmlShutdown writes the report
	got, err := os.ReadFile(report)
	require.NoError(t, err)
	assert.Contains(t, string(got), "gpm_overlapping_calls 0\n")
	assert.Contains(t, string(got), "gpm_samples_live 0\n")
}
