// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/buildsim"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
)

// controlDeadline is the retry deadline of the control run: the outage
// lasts several times longer.
const controlDeadline = 4 * time.Second

// TestGatewayOutageLongerThanAnyDeadline: CloudWatch is down for longer than
// a retry deadline while a sidecar sends through a gateway whose queue and
// journal are small. On the shipped config (max_elapsed_time 0s) the chain
// holds: the exporter's queue fills, then the journal, then the gateway
// refuses requests (retryable) and the sidecar keeps them in its queue;
// once CloudWatch is back everything lands exactly once and nothing was
// dropped. The control run, the same config with a retry deadline, drops
// what it had acknowledged: the outage is long enough to tell them apart.
func TestGatewayOutageLongerThanAnyDeadline(t *testing.T) {
	shipped := readRepoFile(t, "otelcol-gateway.yaml")
	require.Contains(t, shipped, "max_elapsed_time: 0s\n")
	t.Run("shipped", func(t *testing.T) {
		t.Parallel()
		outage(t, "", false)
	})
	t.Run("control with a deadline", func(t *testing.T) {
		t.Parallel()
		cfg := filepath.Join(t.TempDir(), "gateway.yaml")
		withDeadline := strings.Replace(shipped, "max_elapsed_time: 0s\n", "max_elapsed_time: "+controlDeadline.String()+"\n", 1)
		require.NoError(t, os.WriteFile(cfg, []byte(withDeadline), 0o600))
		outage(t, cfg, true)
	})
}

func outage(t *testing.T, config string, control bool) {
	cw, err := cloudwatchtest.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = cw.Close() })
	env := append(gatewayEnv(cw, 2*time.Second), "GPUBUILD_QUEUE_SIZE=2", "GPUBUILD_GATEWAY_JOURNAL_MAX_BYTES=65536")
	if control {
		env = append(env, "GPUBUILD_GATEWAY_RETRY_MAX_INTERVAL=1s")
	}
	gw := newNode(t, "otelcol-gateway.yaml", env...)
	if config != "" {
		gw.config = config
	}
	gw.start()
	sc := newNode(t, sidecarConfig, sidecarEnv(gw)...)
	sc.start()

	var s *buildsim.Summary
	done := make(chan error, 1)
	go func() {
		cfg := workload(sc, 0)
		cfg.Jobs, cfg.Rate = 40, 1
		cfg.RetryMaxElapsed = 4 * time.Minute
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		var err error
		s, err = buildsim.Run(ctx, cfg)
		done <- err
	}()
	require.True(t, binarytest.Eventually(60*time.Second, func() bool { return len(cw.WorkloadDatums()) > 0 }), "data lands")

	require.NoError(t, cw.SetDown(true))
	down := time.Now()
	failed := func() float64 {
		return gw.telemetryValue("otelcol_exporter_send_failed_metric_points")
	}
	if control {
		require.True(t, binarytest.Eventually(90*time.Second, func() bool { return failed() > 0 }),
			"with a deadline the gateway drops acknowledged points during the outage")
		require.NoError(t, cw.SetDown(false))
		require.NoError(t, <-done)
		t.Logf("control: %v acknowledged points dropped after a %v deadline", failed(), controlDeadline)
		return
	}
	require.True(t, binarytest.Eventually(90*time.Second, func() bool {
		return gw.telemetryValue("otelcol_intervalmerge_requests_refused") > 0
	}), "the gateway's queue and journal fill and it refuses requests")
	require.True(t, binarytest.Eventually(30*time.Second, func() bool {
		q, err := queueSizeOf(sc)
		return err == nil && q > 0
	}), "the sidecar keeps the refused requests")
	// Longer than the control's deadline, several times over.
	time.Sleep(time.Until(down.Add(5 * controlDeadline)))
	require.NoError(t, cw.SetDown(false))
	t.Logf("CloudWatch down for %v; %v requests refused", time.Since(down).Round(time.Second), gw.telemetryValue("otelcol_intervalmerge_requests_refused"))

	require.NoError(t, <-done)
	require.Equal(t, s.Generated, s.Acknowledged)
	tr := truth{}
	tr.addService(s.Generated)
	tr.requireLanded(t, cw, 120*time.Second)
	assert.Zero(t, failed(), "nothing acknowledged was dropped")
	_, err = sc.Stop(30 * time.Second)
	require.NoError(t, err)
	_, err = gw.Stop(30 * time.Second)
	require.NoError(t, err)
	assert.Empty(t, tr.mismatches(cw.Datums()), "after every process stopped: no double count")
}
