// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package arm64 runs the linux/arm64 build (make build-arm64, for AWS
// Graviton GPU instances) on this machine under Debian's qemu-user-static,
// with the arm64 C library of Debian's cross toolchain: it lists the same
// components as the amd64 build, and OTLP sent to it lands at the local
// CloudWatch endpoint exactly.
package arm64

import (
	"context"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/buildsim"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/exact"
)

// sysroot holds the arm64 C library (libc6-arm64-cross) the emulated
// binary's dynamic loader is found in.
const sysroot = "/usr/aarch64-linux-gnu"

// emulated returns the argv prefix that runs the arm64 build of bin
// (collector or healthprobe) under qemu. Missing pieces fail the test: make
// test installs them (arm64-deps) and builds the binaries (build-arm64).
func emulated(t testing.TB, bin string) []string {
	t.Helper()
	qemu, err := exec.LookPath("qemu-aarch64-static")
	require.NoError(t, err, "qemu-user-static missing: run `make arm64-deps` (`make test` does)")
	_, err = os.Stat(filepath.Join(sysroot, "lib", "ld-linux-aarch64.so.1"))
	require.NoError(t, err, "the arm64 C library is missing: run `make arm64-deps` (`make test` does)")
	path := filepath.Join(binarytest.RepoRoot(), "bin", "linux-arm64", bin)
	f, err := elf.Open(path)
	require.NoError(t, err, "run `make build-arm64` first (`make test` does)")
	defer func() { _ = f.Close() }()
	require.Equal(t, elf.EM_AARCH64, f.Machine, "%s is not an arm64 binary", path)
	return []string{qemu, "-L", sysroot, path}
}

func run(t *testing.T, argv ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	require.NoError(t, err, "%v:\n%s", argv, out)
	return string(out)
}

// TestArm64Components: the arm64 build lists exactly the components the
// amd64 build (bin/otelcol-gpubuild) does, and its build info names arm64
// with cgo on (go-nvml).
func TestArm64Components(t *testing.T) {
	arm := run(t, append(emulated(t, "otelcol-gpubuild"), "components")...)
	amd := run(t, binarytest.Binary(t), "components")
	assert.Equal(t, amd, arm)
	assert.Contains(t, arm, "nvml")

	info := run(t, "go", "version", "-m", filepath.Join(binarytest.RepoRoot(), "bin", "linux-arm64", "otelcol-gpubuild"))
	assert.Contains(t, info, "GOARCH=arm64")
	assert.Contains(t, info, "CGO_ENABLED=1")
}

// TestArm64DeliversUnderEmulation runs the arm64 collector on the shipped
// otelcol-config.yaml; its arm64 healthprobe passes, and a small build
// service's telemetry lands at the CloudWatch endpoint exactly.
func TestArm64DeliversUnderEmulation(t *testing.T) {
	cw, err := cloudwatchtest.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = cw.Close() })
	p := binarytest.FreePorts(t, 4)
	env := append(binarytest.EnvWithout("AWS_", "GPUBUILD_", "OTEL_"),
		"AWS_REGION=us-east-1",
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_ACCESS_KEY_ID=AKIDARM64TEST0000001",
		"AWS_SECRET_ACCESS_KEY=arm64TestSecretNotUsedAnywhere",
		"AWS_CONFIG_FILE=/dev/null",
		"AWS_SHARED_CREDENTIALS_FILE=/dev/null",
		"GPUBUILD_CLOUDWATCH_OUTPUT=cloudwatch",
		"GPUBUILD_CLOUDWATCH_ENDPOINT="+cw.Endpoint(),
		"GPUBUILD_CLOUDWATCH_NAMESPACE=GPUBuild/Arm64",
		"GPUBUILD_QUEUE_DIR="+filepath.Join(t.TempDir(), "queue"),
		"GPUBUILD_OTLP_GRPC_PORT="+strconv.Itoa(p[0]),
		"GPUBUILD_OTLP_HTTP_PORT="+strconv.Itoa(p[1]),
		"GPUBUILD_HEALTH_PORT="+strconv.Itoa(p[2]),
		"GPUBUILD_TELEMETRY_PORT="+strconv.Itoa(p[3]),
	)
	argv := emulated(t, "otelcol-gpubuild")
	col := binarytest.StartBinaryAt(t, argv[0], env, append(argv[1:], "--config", filepath.Join(binarytest.RepoRoot(), "otelcol-config.yaml"))...)
	health := "http://127.0.0.1:" + strconv.Itoa(p[2]) + "/"
	require.NoError(t, col.AwaitHealthy(health, 3*time.Minute))
	run(t, append(emulated(t, "healthprobe"), health)...)

	cfg := buildsim.DefaultConfig()
	cfg.Endpoint = "127.0.0.1:" + strconv.Itoa(p[0])
	cfg.ServiceName = "arm64-emulated"
	cfg.InstanceID = "arm64-emulated-0"
	cfg.Jobs = 20
	cfg.Seed = 41
	cfg.MetricInterval = 500 * time.Millisecond
	cfg.RetryMaxElapsed = time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := buildsim.Run(ctx, cfg, buildsim.WithLogf(t.Logf))
	require.NoError(t, err)
	require.True(t, s.Exports.Complete(), "the arm64 collector refused exports for good")
	require.Equal(t, s.Generated, s.Acknowledged)
	exact.Await(t, cw, 2*time.Minute, s)
	_, err = col.Stop(90 * time.Second)
	require.NoError(t, err, "exit after SIGTERM")
}
