// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package hostile holds fault cases run against the built binary with the
// shipped otelcol-config.yaml.
package hostile

import (
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
)

// sidecar is the built collector running the default otelcol-config.yaml on
// free ports, with no AWS credentials reachable.
type sidecar struct {
	*binarytest.Process
	health        string
	httpPort      int
	grpcPort      int
	telemetryPort int
}

func cleanEnv(t *testing.T) []string {
	env := binarytest.EnvWithout("AWS_", "GPUBUILD_")
	home := t.TempDir()
	return append(env,
		"HOME="+home,
		"AWS_CONFIG_FILE="+filepath.Join(home, "none"),
		"AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(home, "none"),
		"AWS_EC2_METADATA_DISABLED=true",
	)
}

// stopSoonAfterReady stops a sidecar that only just turned healthy
// (binarytest.Process.StopSoonAfterReady).
func stopSoonAfterReady(t *testing.T, s *sidecar) {
	t.Helper()
	require.NoError(t, s.StopSoonAfterReady(30*time.Second))
}

// startSidecar starts the sidecar with its queue and state in queueDir and
// waits until it is healthy.
func startSidecar(t *testing.T, queueDir string, extraEnv ...string) *sidecar {
	t.Helper()
	ports := binarytest.FreePorts(t, 4)
	healthPort := ports[0]
	s := &sidecar{
		health:        fmt.Sprintf("http://127.0.0.1:%d/", healthPort),
		httpPort:      ports[1],
		grpcPort:      ports[2],
		telemetryPort: ports[3],
	}
	env := append(cleanEnv(t),
		"GPUBUILD_OTLP_GRPC_PORT="+strconv.Itoa(s.grpcPort),
		"GPUBUILD_OTLP_HTTP_PORT="+strconv.Itoa(s.httpPort),
		"GPUBUILD_HEALTH_PORT="+strconv.Itoa(healthPort),
		"GPUBUILD_TELEMETRY_PORT="+strconv.Itoa(s.telemetryPort),
		"GPUBUILD_QUEUE_DIR="+queueDir,
		"GPUBUILD_GPU_COLLECTION_INTERVAL=1s",
	)
	s.Process = binarytest.StartBinary(t, append(env, extraEnv...), "--config", filepath.Join(binarytest.RepoRoot(), "otelcol-config.yaml"))
	require.NoError(t, s.AwaitHealthy(s.health, 60*time.Second), "sidecar healthy")
	return s
}
