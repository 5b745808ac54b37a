// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package compose brings deploy/docker-compose.yaml up as shipped, with
// Debian's docker-compose talking to podman's Docker-compatible socket: the
// sidecar image of `make image` beside the JavaScript SDK build service's
// image (test/jsservice, `make jsservice-image`). What is podman's and not
// the user's lives here: the socket, containers.conf, and the health checks
// that podman runs only when asked (no systemd timers here).
package compose

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/podmantest"
)

const (
	// defaultImage is what `make image` tags; OTELCOL_GPUBUILD_IMAGE names another.
	defaultImage = "localhost/otelcol-gpubuild:dev"
	// defaultServiceImage is what `make jsservice-image` tags;
	// GPUBUILD_JSSERVICE_IMAGE names another.
	defaultServiceImage = "localhost/gpubuild-jsservice:dev"
	sidecarService      = "otelcol-gpubuild"
	buildService        = "index-builder"
)

func imageFromEnv(env, def string) string {
	if v := os.Getenv(env); v != "" {
		return v
	}
	return def
}

// composeFile is the shipped file.
func composeFile() string {
	return filepath.Join(binarytest.RepoRoot(), "deploy", "docker-compose.yaml")
}

// shipped is what the test reads from the shipped file itself.
type shipped struct {
	grace       time.Duration // the sidecar's stop_grace_period
	serviceName string        // the build service's OTEL_SERVICE_NAME
}

func readShipped(t *testing.T) shipped {
	t.Helper()
	b, err := os.ReadFile(composeFile())
	require.NoError(t, err)
	var f struct {
		Services map[string]struct {
			StopGracePeriod string            `yaml:"stop_grace_period"`
			Environment     map[string]string `yaml:"environment"`
		} `yaml:"services"`
	}
	require.NoError(t, yaml.Unmarshal(b, &f))
	grace, err := time.ParseDuration(f.Services[sidecarService].StopGracePeriod)
	require.NoError(t, err, "stop_grace_period of %s", sidecarService)
	name := f.Services[buildService].Environment["OTEL_SERVICE_NAME"]
	require.NotEmpty(t, name, "OTEL_SERVICE_NAME of %s", buildService)
	return shipped{grace: grace, serviceName: name}
}

// engine is `podman system service` on a socket of its own: the Docker API
// docker-compose talks to.
type engine struct {
	socket string
}

func startEngine(t *testing.T) *engine {
	t.Helper()
	// A short path: unix socket paths are limited to 108 bytes.
	dir, err := os.MkdirTemp("", "compose-engine-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	socket := filepath.Join(dir, "podman.sock")
	cmd := podmantest.AsRoot(context.Background(), "podman", "system", "service", "--time=0", "unix://"+socket)
	out := &binarytest.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	// Ended by its process group (sudo, when the test is not root, relays
	// the signal); never waited on for ever.
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
			return
		case <-time.After(30 * time.Second):
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Logf("podman system service (pid %d) did not exit", cmd.Process.Pid)
		}
	})
	ok := binarytest.Eventually(30*time.Second, func() bool {
		c, err := net.Dial("unix", socket)
		if err == nil {
			_ = c.Close()
		}
		return err == nil
	})
	require.True(t, ok, "podman's socket never answered:\n%s", out.String())
	return &engine{socket: socket}
}

// project is one Compose project of the shipped file with a test override.
type project struct {
	t        *testing.T
	e        *engine
	name     string
	override string
	env      []string // variables the shipped file reads, as a user sets them
}

// newProject writes the override (the sidecar image under test and its
// CloudWatch endpoint) and registers `down -v` and the removal of anything
// left behind.
func newProject(t *testing.T, e *engine, override string, env ...string) *project {
	t.Helper()
	p := &project{t: t, e: e, name: podmantest.UniqueName(t, "compose"), env: env}
	p.override = filepath.Join(t.TempDir(), "override.yaml")
	require.NoError(t, os.WriteFile(p.override, []byte(override), 0o644))
	t.Cleanup(func() {
		if t.Failed() {
			for _, svc := range []string{sidecarService, buildService} {
				if name, err := p.container(svc); err == nil && name != "" {
					logs, _ := podmantest.Logs(name)
					t.Logf("%s output (tail):\n%s", svc, binarytest.Tail(logs, 4000))
				}
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		// down may leave the sidecar behind (podman removes the containers
		// at once and refuses the namespace's owner first): removed below.
		_, _ = p.compose(ctx, "down", "-v", "--timeout", "0")
		label := "label=com.docker.compose.project=" + p.name
		if ids, _ := podmantest.Run(ctx, "ps", "-aq", "--filter", label); strings.TrimSpace(ids) != "" {
			_, _ = podmantest.Run(ctx, append([]string{"rm", "-f", "-v"}, strings.Fields(ids)...)...)
		}
		_, _ = podmantest.Run(ctx, "network", "rm", "-f", p.name+"_default")
		_, _ = podmantest.Run(ctx, "volume", "rm", "-f", p.name+"_otelcol-queue")
	})
	return p
}

// compose runs docker-compose on the shipped file and the override, as root
// (podman's socket is root's), and returns its output.
func (p *project) compose(ctx context.Context, args ...string) (string, error) {
	argv := append([]string{"DOCKER_HOST=unix://" + p.e.socket, "COMPOSE_PROJECT_NAME=" + p.name}, p.env...)
	argv = append(argv, "docker-compose", "--ansi", "never", "-f", composeFile(), "-f", p.override)
	argv = append(argv, args...)
	cmd := podmantest.AsRoot(ctx, "env", argv...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("docker-compose %s: %w", strings.Join(args, " "), err)
	}
	return out.String(), err
}

// upWhileHealthChecking is `docker-compose up -d`, which waits for the
// sidecar's service_healthy before it starts the service: while it runs,
// the sidecar's health check is run once a second, as podman's timer would.
// before is called once the sidecar runs and before its first health check.
// It returns when up has finished, with the start of the sidecar's first
// passing health check (zero if none passed).
func (p *project) upWhileHealthChecking(before func(sidecar string)) time.Time {
	t := p.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	type result struct {
		out string
		err error
	}
	up := make(chan result, 1)
	go func() {
		out, err := p.compose(ctx, "up", "-d")
		up <- result{out, err}
	}()
	var sidecar string
	ok := binarytest.Eventually(2*time.Minute, func() bool {
		sidecar, _ = p.container(sidecarService)
		return sidecar != "" && p.state(sidecar).Running
	})
	require.True(t, ok, "the sidecar's container never ran")
	if before != nil {
		before(sidecar)
	}
	var healthy time.Time
	for {
		select {
		case r := <-up:
			require.NoError(t, r.err, r.out)
			return healthy
		case <-time.After(time.Second):
		}
		start := time.Now()
		if err := podmantest.Healthcheck(sidecar); err == nil && healthy.IsZero() {
			healthy = start
		}
	}
}

// container is the name of a service's container ("" while there is none).
func (p *project) container(service string) (string, error) {
	out, err := podmantest.Run(context.Background(), "ps", "-a", "--format", "{{.Names}}",
		"--filter", "label=com.docker.compose.project="+p.name,
		"--filter", "label=com.docker.compose.service="+service)
	return strings.TrimSpace(out), err
}

// state is what podman knows of a container.
type state struct {
	Running   bool
	ExitCode  int
	StartedAt time.Time
	Health    struct{ Status string }
}

func (p *project) state(name string) state {
	p.t.Helper()
	var st state
	out := podmantest.Must(p.t, "inspect", "--format", "{{json .State}}", name)
	require.NoError(p.t, json.Unmarshal([]byte(out), &st), out)
	return st
}

// healthStatus is podman's health status of a container.
func (p *project) healthStatus(name string) string { return p.state(name).Health.Status }

// stop is `docker-compose stop`: SIGTERM to each container, SIGKILL after
// its stop_grace_period (the service's default 10 s). It returns how long
// it took.
func (p *project) stop() time.Duration {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	out, err := p.compose(ctx, "stop")
	require.NoError(p.t, err, out)
	return time.Since(start)
}
