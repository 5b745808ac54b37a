// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/buildsim"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/promtext"
)

// The probes of deploy/gateway-kubernetes.yaml.
const (
	readinessPath = "/"
	livenessPath  = "/?pipeline=extensions"
	// unreadyAfter is the shipped health_check's recovery_duration.
	unreadyAfter = 30 * time.Second
)

// TestGatewayReadinessFollowsItsJournalAndItsSends: on the shipped config
// and command line, a gateway's readiness endpoint answers 500 once its
// journal has been full (it refuses requests) or its CloudWatch calls have
// all failed for recovery_duration (30 s), not before (a blip does not
// take it out of the load balancer), and 200 again once a hand-over made
// room or CloudWatch took a call; its liveness endpoint answers 200
// throughout. Everything the sidecar sent lands exactly once.
func TestGatewayReadinessFollowsItsJournalAndItsSends(t *testing.T) {
	shipped := readRepoFile(t, gatewayConfig)
	require.Contains(t, shipped, "recovery_duration: "+unreadyAfter.String()+"\n")
	t.Run("journal full", func(t *testing.T) {
		t.Parallel()
		readiness(t, "state.journal.max_bytes",
			[]string{"GPUBUILD_QUEUE_SIZE=2", "GPUBUILD_GATEWAY_JOURNAL_MAX_BYTES=65536"},
			// Throttled, not failing: the exporter's status stays OK, its
			// queue fills, then the journal.
			func(cw *cloudwatchtest.Server, on bool) {
				if on {
					cw.SetFaults(cloudwatchtest.Faults{ThrottleEvery: 1})
				} else {
					cw.SetFaults(cloudwatchtest.Faults{})
				}
			},
			func(gw *node) bool {
				return gw.telemetryValue("otelcol_intervalmerge_requests_refused_journal_full") > 0
			})
	})
	t.Run("CloudWatch down", func(t *testing.T) {
		t.Parallel()
		readiness(t, "PutMetricData is failing", nil,
			func(cw *cloudwatchtest.Server, on bool) { require.NoError(t, cw.SetDown(on)) },
			func(gw *node) bool {
				f, err := promtext.Scrape(fmt.Sprintf("127.0.0.1:%d", gw.telemetry))
				require.NoError(t, err)
				v, _ := f.Sum("otelcol_exporter_cloudwatch_requests", map[string]string{"outcome": "network_error"})
				return v > 0
			})
	})
}

// readiness runs a gateway and a sidecar, turns fault on once data lands,
// and times the readiness endpoint against the first sign of the fault
// (started: the first refusal, the first failed call).
func readiness(t *testing.T, cause string, env []string, fault func(*cloudwatchtest.Server, bool), started func(*node) bool) {
	cw, err := cloudwatchtest.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = cw.Close() })
	gw := newNode(t, gatewayConfig, append(gatewayEnv(cw, 2*time.Second), env...)...)
	gw.start()
	sc := newNode(t, sidecarConfig, sidecarEnv(gw)...)
	sc.start()
	ready := fmt.Sprintf("http://127.0.0.1:%d%s", gw.health, readinessPath)
	live := fmt.Sprintf("http://127.0.0.1:%d%s", gw.health, livenessPath)

	var s *buildsim.Summary
	done := make(chan error, 1)
	go func() {
		cfg := workload(sc, 0)
		cfg.Jobs, cfg.Rate = 60, 1
		cfg.RetryMaxElapsed = 5 * time.Minute
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		var err error
		s, err = buildsim.Run(ctx, cfg)
		done <- err
	}()
	require.True(t, binarytest.Eventually(60*time.Second, func() bool { return len(cw.WorkloadDatums()) > 0 }), "data lands")
	code, _ := get(t, ready)
	require.Equal(t, http.StatusOK, code, "ready while it sends")

	fault(cw, true)
	require.True(t, binarytest.Eventually(90*time.Second, func() bool { return started(gw) }), "the fault shows")
	since := time.Now()
	var unready time.Duration
	var body string
	for unready == 0 {
		code, b := get(t, ready)
		lcode, _ := get(t, live)
		require.Equal(t, http.StatusOK, lcode, "liveness stays 200 at %v", time.Since(since))
		if code != http.StatusOK {
			unready, body = time.Since(since), b
			assert.Equal(t, http.StatusInternalServerError, code)
			break
		}
		require.Less(t, time.Since(since), unreadyAfter+30*time.Second, "unready within recovery_duration and a slack")
		time.Sleep(250 * time.Millisecond)
	}
	// The fault started at most one poll before it showed.
	assert.GreaterOrEqual(t, unready, unreadyAfter-time.Second, "ready until recovery_duration passed")
	_, verbose := get(t, ready+"?verbose")
	assert.Contains(t, verbose, cause, "the verbose answer names the cause")
	t.Logf("unready %v after the fault showed (recovery_duration %v): %s", unready.Round(100*time.Millisecond), unreadyAfter, body)

	fault(cw, false)
	cleared := time.Now()
	require.True(t, binarytest.Eventually(120*time.Second, func() bool {
		lcode, _ := get(t, live)
		require.Equal(t, http.StatusOK, lcode, "liveness stays 200")
		code, _ := get(t, ready)
		return code == http.StatusOK
	}), "ready again once the fault is over")
	t.Logf("ready again %v after the fault ended", time.Since(cleared).Round(100*time.Millisecond))

	require.NoError(t, <-done)
	require.Equal(t, s.Generated, s.Acknowledged)
	tr := truth{}
	tr.addService(s.Generated)
	tr.requireLanded(t, cw, 120*time.Second)
	_, err = sc.Stop(30 * time.Second)
	require.NoError(t, err)
	_, err = gw.Stop(30 * time.Second)
	require.NoError(t, err)
	assert.Empty(t, tr.mismatches(cw.Datums()), "no double count")
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, strings.TrimSpace(string(b))
}
