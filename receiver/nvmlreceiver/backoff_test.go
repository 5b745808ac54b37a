// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlreceiver

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/gpubuild/otelcol-gpubuild/internal/nvmlapi"
	"github.com/gpubuild/otelcol-gpubuild/receiver/nvmlreceiver/internal/metadata"
)

// TestInitRetriesBackOff scrapes on a manual clock a second before each
// attempt is due (nothing is tried) and when it is: without NVML, on an
// extension's session that has none, or with NVML but no GPU, the attempts
// come 1, 2, 4, 8, 15 and 15 min apart; with init_retry_max_interval equal
// to init_retry_interval every minute. GPUs found reset the schedule: after
// a restart that fails again the next attempt is a minute later.
func TestInitRetriesBackOff(t *testing.T) {
	ctx := context.Background()
	minute := time.Minute
	backedOff := []time.Duration{minute, 2 * minute, 4 * minute, 8 * minute, 15 * minute, 15 * minute}
	for name, tc := range map[string]struct {
		maxInterval time.Duration
		borrowed    bool // on an nvml_sampler's session
		noGPU       bool // NVML loads but shows no GPU
		want        []time.Duration
	}{
		"no library":                 {maxInterval: 15 * minute, want: backedOff},
		"borrowed session not ready": {maxInterval: 15 * minute, borrowed: true, want: backedOff},
		"no GPU":                     {maxInterval: 15 * minute, noGPU: true, want: backedOff},
		"max is init_retry_interval": {maxInterval: minute, want: slices.Repeat([]time.Duration{minute}, 6)},
	} {
		t.Run(name, func(t *testing.T) {
			clock := &testClock{t: time.Unix(1_700_000_000, 0)}
			var attempts []time.Time
			attempt := func() { attempts = append(attempts, clock.now()) }
			srv := newMockServer()
			present := false
			if tc.noGPU {
				srv.DeviceGetCountFunc = func() (int, nvml.Return) { attempt(); return 0, nvml.SUCCESS }
			}
			load := func() (library, error) {
				if !present && !tc.noGPU {
					attempt()
					return nil, errNoLibrary
				}
				return srv, nil
			}
			host := componenttest.NewNopHost()
			cfg := defaultTestConfig()
			cfg.InitRetryMaxInterval = tc.maxInterval
			if tc.borrowed {
				id := component.MustNewID("nvml_sampler")
				cfg.NVMLSession = &id
				host = hostWith{id: &lendingLender{lend: func() nvmlapi.Library {
					if !present {
						attempt()
						return nil
					}
					return srv
				}}}
				load = nil // the receiver loads no NVML of its own
			}
			s := newGPUScraperWith(cfg, receivertest.NewNopSettings(metadata.Type), load, nil, clock.now)
			require.NoError(t, s.start(ctx, host))
			t.Cleanup(func() { require.NoError(t, s.shutdown(ctx)) })
			gaps := func() []time.Duration {
				var out []time.Duration
				for i := 1; i < len(attempts); i++ {
					out = append(out, attempts[i].Sub(attempts[i-1]))
				}
				return out
			}
			// next scrapes a second before the next attempt is due, then when
			// it is, as the pacer would wake the controller.
			next := func() {
				n := len(attempts)
				clock.advance(s.nextInit.Sub(clock.now()) - time.Second)
				_, err := s.scrape(ctx)
				require.NoError(t, err)
				require.Len(t, attempts, n, "no attempt before the next is due")
				clock.advance(time.Second)
				_, err = s.scrape(ctx)
				require.NoError(t, err)
			}
			for range tc.want {
				next()
			}
			assert.Equal(t, tc.want, gaps())
			assert.Empty(t, s.gpus)
			if tc.noGPU {
				return
			}

			present = true
			next()
			require.NotEmpty(t, s.gpus)
			require.NoError(t, s.shutdown(ctx))
			present = false
			attempts = nil
			require.NoError(t, s.start(ctx, host))
			next()
			next()
			assert.Equal(t, tc.want[:2], gaps(), "the schedule starts again after GPUs were found")
		})
	}
}

// lendingLender is an nvml_sampler whose session is lend()'s at each look:
// nil while it has not loaded NVML.
type lendingLender struct {
	component.StartFunc
	component.ShutdownFunc
	lend func() nvmlapi.Library
	gpm  nvmlapi.GPMLock
}

func (l *lendingLender) NVMLSession() (nvmlapi.Library, *nvmlapi.GPMLock, bool) {
	lib := l.lend()
	return lib, &l.gpm, lib != nil
}

// TestScrapeCadenceFollowsBackedOffAttempts drives the real scraperhelper
// controller on a manual clock without NVML: the one timer armed waits
// for each backed-off attempt (1, 3, 7, 15, 30 and 45 min after start),
// nothing scrapes in between, and each attempt is one scrape. Once NVML
// loads, points arrive every collection_interval.
func TestScrapeCadenceFollowsBackedOffAttempts(t *testing.T) {
	cfg := defaultTestConfig()
	r := startWithoutNVML(t, cfg)
	c, t0, sink := r.clock, r.t0, r.sink

	awaitScrapes(t, sink, 1) // the controller's scrape at start
	for k, at := range []time.Duration{1, 3, 7, 15, 30, 45} {
		due := t0.Add(at * time.Minute)
		require.Equal(t, []time.Time{due}, c.pending(), "one timer, for attempt %d", k+1)
		for c.now().Add(cfg.CollectionInterval).Before(due) {
			c.advance(cfg.CollectionInterval)
		}
		assert.Len(t, sink.AllMetrics(), 1+k, "nothing scrapes between attempts")
		c.advance(due.Sub(c.now()))
		awaitScrapes(t, sink, 2+k)
	}
	assert.Zero(t, sink.DataPointCount())

	r.present.Store(true)
	due := t0.Add(60 * time.Minute)
	require.Equal(t, []time.Time{due}, c.pending())
	c.advance(due.Sub(c.now()))
	awaitScrapes(t, sink, 8)
	assert.Positive(t, sink.AllMetrics()[7].DataPointCount())
	assert.Equal(t, []time.Time{due.Add(cfg.CollectionInterval)}, c.pending(), "GPUs: the collection interval")
}
