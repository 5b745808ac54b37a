// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package container

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
)

// shutdownTimes are the shipped config's settings that bound a SIGTERM.
type shutdownTimes struct {
	flush, drain, request, retryInitial time.Duration
}

func shippedShutdownTimes(t *testing.T) shutdownTimes {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(binarytest.RepoRoot(), "otelcol-config.yaml"))
	require.NoError(t, err)
	defaults := map[string]string{}
	for _, m := range regexp.MustCompile(`\$\{env:([A-Z0-9_]+):-([^}]*)\}`).FindAllStringSubmatch(string(b), -1) {
		defaults[m[1]] = m[2]
	}
	var cfg struct {
		Exporters struct {
			CloudWatch struct {
				RequestTimeout string `yaml:"request_timeout"`
				Retry          struct {
					InitialInterval string `yaml:"initial_interval"`
				} `yaml:"retry_on_failure"`
			} `yaml:"cloudwatch"`
		} `yaml:"exporters"`
	}
	require.NoError(t, yaml.Unmarshal(b, &cfg))
	parse := func(what, v string) time.Duration {
		d, err := time.ParseDuration(v)
		require.NoError(t, err, "%s: %q", what, v)
		return d
	}
	return shutdownTimes{
		flush:        parse("GPUBUILD_FLUSH_INTERVAL", defaults["GPUBUILD_FLUSH_INTERVAL"]),
		drain:        parse("GPUBUILD_SHUTDOWN_DRAIN_TIMEOUT", defaults["GPUBUILD_SHUTDOWN_DRAIN_TIMEOUT"]),
		request:      parse("request_timeout", cfg.Exporters.CloudWatch.RequestTimeout),
		retryInitial: parse("retry_on_failure::initial_interval", cfg.Exporters.CloudWatch.Retry.InitialInterval),
	}
}

// worst is the longest SIGTERM-to-exit of these settings while CloudWatch
// takes requests and never answers: the buildjob connector's final flush
// (up to one flush interval), shutdown_drain_timeout, the request in flight
// when the drain gives up (awaited up to request_timeout, past the export's
// timeout, so that a late answer is not sent twice), and then
// exporterhelper's last batch flush at shutdown, which waits for that
// request's worker and sends one more request (up to request_timeout).
func (s shutdownTimes) worst() time.Duration { return s.flush + s.drain + 2*s.request }

// TestGraceCoversShutdown: the grace periods in deploy/ outlast the worst
// shutdown, so a runtime never SIGKILLs a sidecar that is still sending.
// TestContainerStopWhileCloudWatchHangs measures one such shutdown.
func TestGraceCoversShutdown(t *testing.T) {
	worst := shippedShutdownTimes(t).worst()
	assert.Greater(t, composeGrace(t), worst, "stop_grace_period in deploy/docker-compose.yaml")

	b, err := os.ReadFile(filepath.Join(binarytest.RepoRoot(), "deploy", "kubernetes", "pod.yaml"))
	require.NoError(t, err)
	var pod struct {
		Spec struct {
			TerminationGracePeriodSeconds int `yaml:"terminationGracePeriodSeconds"`
		} `yaml:"spec"`
	}
	require.NoError(t, yaml.Unmarshal(b, &pod))
	assert.Greater(t, time.Duration(pod.Spec.TerminationGracePeriodSeconds)*time.Second, worst,
		"terminationGracePeriodSeconds in deploy/kubernetes/pod.yaml")
}
