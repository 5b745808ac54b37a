// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package podmantest runs rootful podman with the project's engine settings
// (scripts/image/containers.conf) for the tests that run the images:
// test/container and test/compose.
package podmantest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
)

// ContainersConf is the containers.conf the tests use: CONTAINERS_CONF
// when set, else scripts/image/containers.conf.
func ContainersConf() string {
	if conf := os.Getenv("CONTAINERS_CONF"); conf != "" {
		return conf
	}
	return filepath.Join(binarytest.RepoRoot(), "scripts", "image", "containers.conf")
}

// AsRoot is a command run as root, with CONTAINERS_CONF set: the tests run
// rootful podman (what containers.conf was checked with), through sudo -n
// when the test is not root.
func AsRoot(ctx context.Context, name string, args ...string) *exec.Cmd {
	conf := ContainersConf()
	if os.Geteuid() != 0 {
		args = append([]string{"-n", "CONTAINERS_CONF=" + conf, name}, args...)
		name = "sudo"
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "CONTAINERS_CONF="+conf)
	return cmd
}

// Run runs podman and returns its stdout; the error carries stderr.
func Run(ctx context.Context, args ...string) (string, error) {
	cmd := AsRoot(ctx, "podman", args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return stdout.String(), fmt.Errorf("podman %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// Must is Run that fails the test on error.
func Must(t testing.TB, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := Run(ctx, args...)
	require.NoError(t, err)
	return out
}

// UniqueName is a container, volume or project name no other test run uses.
func UniqueName(t testing.TB, what string) string {
	b := make([]byte, 4)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return "otelcol-test-" + what + "-" + hex.EncodeToString(b)
}

// Logs is a container's output so far, stdout and stderr together.
func Logs(name string) (string, error) {
	out, err := AsRoot(context.Background(), "podman", "logs", name).CombinedOutput()
	return string(out), err
}

// Healthcheck runs a container's health check once, as the engine's timer
// would (podman healthcheck run; there is no systemd to run the timers);
// nil when it passed.
func Healthcheck(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := Run(ctx, "healthcheck", "run", name)
	return err
}

// RequireImage fails the test when image is missing: `make test` builds
// the images first.
func RequireImage(t testing.TB, image, target string) {
	t.Helper()
	if _, err := Run(context.Background(), "image", "exists", image); err != nil {
		t.Fatalf("image %s not found (%v): run `make %s` first (`make test` builds it)", image, err, target)
	}
}
