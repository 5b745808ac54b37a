// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package container

import (
	"context"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/buildsim"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/exact"
)

// sim runs a small build service (buildsim: job, stage and API spans, job
// status logs, the SDK's own metrics) against the sidecar in the container
// and requires that the sidecar acknowledged everything.
func (w *world) sim(service string, protocol string, jobs int, seed int64) *buildsim.Summary {
	t := w.t
	t.Helper()
	cfg := buildsim.DefaultConfig()
	cfg.Protocol = protocol
	cfg.Endpoint = w.endpoint(protocol)
	cfg.ServiceName = service
	cfg.InstanceID = service + "-0"
	cfg.Seed = seed
	cfg.Jobs = jobs
	cfg.Rate = 100
	cfg.FailureRatio = 0.15
	cfg.CancelRatio = 0.05
	cfg.MetricInterval = 500 * time.Millisecond
	cfg.ExportTimeout = 5 * time.Second
	cfg.RetryMaxElapsed = 30 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := buildsim.Run(ctx, cfg, buildsim.WithLogf(t.Logf))
	require.NoError(t, err)
	e := s.Exports
	require.True(t, e.Complete(), "the sidecar refused exports for good: spans %q logs %q metrics %q",
		e.Spans.LastError, e.LogRecords.LastError, e.MetricPoints.LastError)
	require.Equal(t, s.Generated, s.Acknowledged, "the sidecar acknowledged less than was sent")
	return s
}

// awaitExact waits until what landed equals what every summary sent (exact.Await).
func (w *world) awaitExact(timeout time.Duration, sums ...*buildsim.Summary) {
	w.t.Helper()
	exact.Await(w.t, w.cw, timeout, sums...)
}
