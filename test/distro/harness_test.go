// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package distro

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
)

// sidecar is the built collector running the default otelcol-config.yaml on
// free ports, with no AWS credentials reachable (dry run).
type sidecar struct {
	*binarytest.Process
	httpPort, grpcPort int
	health             string
}

// cleanEnv is the environment of a machine with no AWS account: nothing from
// the test runner's AWS settings leaks in, and no metadata service is asked.
// The runner's Go runtime settings stay out too: the binary's defaults are
// under test.
func cleanEnv(t *testing.T) []string {
	env := binarytest.EnvWithout("AWS_", "GPUBUILD_", "GOMAXPROCS=", "GODEBUG=")
	home := t.TempDir()
	return append(env,
		"HOME="+home,
		"AWS_CONFIG_FILE="+filepath.Join(home, "none"),
		"AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(home, "none"),
		"AWS_EC2_METADATA_DISABLED=true",
	)
}

func startSidecar(t *testing.T, extraEnv ...string) *sidecar {
	t.Helper()
	return startSidecarAt(t, binarytest.Binary(t), extraEnv...)
}

// startSidecarAt starts the sidecar from the binary at bin.
func startSidecarAt(t *testing.T, bin string, extraEnv ...string) *sidecar {
	t.Helper()
	ports := binarytest.FreePorts(t, 4)
	s := &sidecar{httpPort: ports[0], grpcPort: ports[1]}
	healthPort := ports[2]
	s.health = fmt.Sprintf("http://127.0.0.1:%d/", healthPort)
	env := append(cleanEnv(t),
		"GPUBUILD_OTLP_GRPC_PORT="+strconv.Itoa(s.grpcPort),
		"GPUBUILD_OTLP_HTTP_PORT="+strconv.Itoa(s.httpPort),
		"GPUBUILD_HEALTH_PORT="+strconv.Itoa(healthPort),
		"GPUBUILD_TELEMETRY_PORT="+strconv.Itoa(ports[3]),
		"GPUBUILD_QUEUE_DIR="+t.TempDir(),
		"GPUBUILD_FLUSH_INTERVAL=1s",
		"GPUBUILD_GPU_COLLECTION_INTERVAL=1s",
	)
	s.Process = binarytest.StartBinaryAt(t, bin, append(env, extraEnv...), "--config", filepath.Join(binarytest.RepoRoot(), "otelcol-config.yaml"))
	require.NoError(t, s.AwaitHealthy(s.health, 30*time.Second), "sidecar")
	return s
}

func (s *sidecar) healthy() bool { return binarytest.Healthy(s.health) }

// waitOutput waits until the collector's output contains want.
func (s *sidecar) waitOutput(t *testing.T, want string, timeout time.Duration) {
	t.Helper()
	require.NoError(t, s.AwaitOutput(want, timeout))
}

// terminate sends SIGTERM and returns the exit error (nil for exit code 0).
func (s *sidecar) terminate(t *testing.T, timeout time.Duration) error {
	t.Helper()
	_, err := s.Stop(timeout)
	return err
}

// runBinary runs a one-shot subcommand and returns its combined output.
func runBinary(t *testing.T, env []string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binarytest.Binary(t), args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return string(out), err
}
