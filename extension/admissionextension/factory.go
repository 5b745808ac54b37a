// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package admissionextension // import "github.com/gpubuild/otelcol-gpubuild/extension/admissionextension"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"

	"github.com/gpubuild/otelcol-gpubuild/extension/admissionextension/internal/admission"
	"github.com/gpubuild/otelcol-gpubuild/extension/admissionextension/internal/memory"
	"github.com/gpubuild/otelcol-gpubuild/extension/admissionextension/internal/metadata"
)

const (
	defaultMaxInFlight = 2
	defaultMaxWaiting  = 64
	defaultWaitTimeout = 10 * time.Second
)

// NewFactory returns the admission extension factory.
func NewFactory() extension.Factory {
	return extension.NewFactory(metadata.Type, createDefaultConfig, create, metadata.ExtensionStability)
}

func createDefaultConfig() component.Config {
	return &Config{
		MaxInFlight: defaultMaxInFlight, MaxWaiting: defaultMaxWaiting, WaitTimeout: defaultWaitTimeout,
		// The check at most 10 times a second under load (a reading costs
		// about a microsecond). A collection at most once a second above
		// the soft limit, not memory_limiter's 10 s: memory_limiter refuses
		// decoded data, whose allocation starts the runtime's own
		// collection; refusing before the read allocates nothing, so the
		// dead objects would hold the heap over the soft limit (refusing
		// everything) until the next forced collection.
		Memory: MemoryConfig{
			CheckInterval:                100 * time.Millisecond,
			MinGCIntervalWhenSoftLimited: time.Second,
			MinGCIntervalWhenHardLimited: time.Second,
		},
	}
}

func create(_ context.Context, set extension.Settings, cfg component.Config) (extension.Extension, error) {
	return newExtension(set, cfg.(*Config), memory.ReadHeap, nil)
}

// newExtension reads the heap with readHeap and collects with gc (nil: runtime.GC).
func newExtension(set extension.Settings, c *Config, readHeap func() uint64, gc func()) (*admissionExtension, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	ext := &admissionExtension{
		gate:        admission.New(c.MaxInFlight, c.MaxWaiting, c.WaitTimeout),
		maxInFlight: c.MaxInFlight,
		logger:      set.Logger,
		telemetry:   tb,
	}
	if m := c.Memory; m.LimitMiB > 0 {
		spike := m.SpikeLimitMiB
		if spike == 0 {
			spike = m.LimitMiB / 5
		}
		ext.memory = memory.New(memory.Limits{
			Hard:           uint64(m.LimitMiB) << 20,
			Soft:           uint64(m.LimitMiB-spike) << 20,
			CheckInterval:  m.CheckInterval,
			SoftGCInterval: m.MinGCIntervalWhenSoftLimited,
			HardGCInterval: m.MinGCIntervalWhenHardLimited,
		}, readHeap, gc, nil, set.Logger)
	}
	return ext, nil
}
