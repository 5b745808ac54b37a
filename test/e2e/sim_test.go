// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/buildsim"
)

// simConfig is a buildsim run against the collector's OTLP listener for
// protocol, as one service (service.name) with its own seed.
func simConfig(p ports, protocol, service string, seed int64) buildsim.Config {
	cfg := buildsim.DefaultConfig()
	cfg.Protocol = protocol
	cfg.Endpoint = fmt.Sprintf("127.0.0.1:%d", p.GRPC)
	if protocol == buildsim.ProtocolHTTP {
		cfg.Endpoint = fmt.Sprintf("127.0.0.1:%d", p.HTTP)
	}
	cfg.ServiceName = service
	cfg.InstanceID = service + "-0"
	cfg.Seed = seed
	cfg.Jobs = 200
	cfg.Rate = 200
	cfg.FailureRatio = 0.15
	cfg.CancelRatio = 0.05
	cfg.API4xxRatio = 0.06
	cfg.API5xxRatio = 0.03
	cfg.MetricInterval = 500 * time.Millisecond
	cfg.ExportTimeout = 5 * time.Second
	cfg.RetryMaxElapsed = 30 * time.Second
	return cfg
}

// runSim runs buildsim in-process and requires that the collector
// acknowledged everything.
func runSim(t *testing.T, cfg buildsim.Config) *buildsim.Summary {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := buildsim.Run(ctx, cfg, buildsim.WithLogf(t.Logf))
	require.NoError(t, err)
	requireAllAcknowledged(t, s)
	return s
}

func requireAllAcknowledged(t *testing.T, s *buildsim.Summary) {
	t.Helper()
	e := s.Exports
	require.True(t, e.Complete(),
		"the collector refused exports for good: spans %q logs %q metrics %q", e.Spans.LastError, e.LogRecords.LastError, e.MetricPoints.LastError)
	if e.MetricPoints.RequestsFailed > 0 {
		t.Logf("%d intermediate metric exports failed (cumulative: a later export carried their points): %s", e.MetricPoints.RequestsFailed, e.MetricPoints.LastError)
	}
	require.Equal(t, s.Generated, s.Acknowledged)
}

// runSims runs several simulated services at once.
func runSims(t *testing.T, cfgs ...buildsim.Config) []*buildsim.Summary {
	t.Helper()
	out := make([]*buildsim.Summary, len(cfgs))
	errs := make([]error, len(cfgs))
	done := make(chan int)
	for i, cfg := range cfgs {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			out[i], errs[i] = buildsim.Run(ctx, cfg, buildsim.WithLogf(t.Logf))
			done <- i
		}()
	}
	for range cfgs {
		<-done
	}
	for i := range cfgs {
		require.NoError(t, errs[i], cfgs[i].ServiceName)
		requireAllAcknowledged(t, out[i])
	}
	return out
}

func serviceDims(s *buildsim.Summary) map[string]string {
	return map[string]string{"service.name": s.Service}
}
