// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package container runs the sidecar image that `make image` builds the way
// users deploy it: podman, a read-only root filesystem, the image's own
// non-root user, the queue on a named volume, the host's network (so the
// sidecar's 127.0.0.1 listeners are the host's). OTLP comes from the host
// (internal/testing/buildsim, the OpenTelemetry Go SDK) and PutMetricData goes to
// the local CloudWatch endpoint (internal/testing/cloudwatchtest) on the host; what
// landed is compared with what the simulator sent, exactly.
package container

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/podmantest"
)

// defaultImage is what `make image` tags; OTELCOL_GPUBUILD_IMAGE names another.
const defaultImage = "localhost/otelcol-gpubuild:dev"

// queueDir is where the image keeps its queue (its VOLUME and GPUBUILD_QUEUE_DIR).
const queueDir = "/var/lib/otelcol-gpubuild/queue"

// imageName is the image under test. A missing image fails the test: the
// tests are about the image a user runs, and `make test` builds it first.
func imageName(t testing.TB) string {
	t.Helper()
	image := defaultImage
	if v := os.Getenv("OTELCOL_GPUBUILD_IMAGE"); v != "" {
		image = v
	}
	podmantest.RequireImage(t, image, "image")
	return image
}

// newVolume creates a named volume, removed at cleanup.
func newVolume(t testing.TB) string {
	t.Helper()
	name := podmantest.UniqueName(t, "queue")
	podmantest.Must(t, "volume", "create", name)
	t.Cleanup(func() { _, _ = podmantest.Run(context.Background(), "volume", "rm", "--force", name) })
	return name
}

// world is one test's surroundings: the CloudWatch endpoint on the host and
// the sidecar's ports.
type world struct {
	t                            *testing.T
	image                        string
	cw                           *cloudwatchtest.Server
	grpc, http, health, selfPort int
	namespace                    string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	image := imageName(t)
	cw, err := cloudwatchtest.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = cw.Close() })
	p := binarytest.FreePorts(t, 4)
	return &world{t: t, image: image, cw: cw, grpc: p[0], http: p[1], health: p[2], selfPort: p[3], namespace: "GPUBuild/Container"}
}

// sidecar is one container of the image.
type sidecar struct {
	t    *testing.T
	name string
}

// runOpts are what differs between the tests' containers.
type runOpts struct {
	volume string
	// extraArgs go before the image (mounts, environment).
	extraArgs []string
}

// start runs the image as a user deploys it: read-only, the image's own
// user, the queue on the named volume, SIGTERM on stop; it returns once the
// container runs (not yet healthy).
func (w *world) start(o runOpts) *sidecar {
	t := w.t
	t.Helper()
	name := podmantest.UniqueName(t, "sidecar")
	args := []string{"run", "--detach", "--name", name,
		"--read-only", "--network", "host",
		"--volume", o.volume + ":" + queueDir,
		"--env", "AWS_REGION=us-east-1",
		"--env", "AWS_EC2_METADATA_DISABLED=true",
		"--env", "AWS_ACCESS_KEY_ID=AKIDCONTAINER0000001",
		"--env", "AWS_SECRET_ACCESS_KEY=containerTestSecretNotUsedAnywhere",
		"--env", "GPUBUILD_CLOUDWATCH_OUTPUT=cloudwatch",
		"--env", "GPUBUILD_CLOUDWATCH_ENDPOINT=" + w.cw.Endpoint(),
		"--env", "GPUBUILD_CLOUDWATCH_NAMESPACE=" + w.namespace,
		"--env", "GPUBUILD_OTLP_GRPC_PORT=" + strconv.Itoa(w.grpc),
		"--env", "GPUBUILD_OTLP_HTTP_PORT=" + strconv.Itoa(w.http),
		"--env", "GPUBUILD_HEALTH_PORT=" + strconv.Itoa(w.health),
		"--env", "GPUBUILD_TELEMETRY_PORT=" + strconv.Itoa(w.selfPort),
	}
	args = append(args, o.extraArgs...)
	args = append(args, w.image)
	podmantest.Must(t, args...)
	s := &sidecar{t: t, name: name}
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := podmantest.Logs(name)
			t.Logf("container %s output (last 6000 bytes):\n%s", name, binarytest.Tail(logs, 6000))
		}
		_, _ = podmantest.Run(context.Background(), "rm", "--force", "--volumes", "--time", "0", name)
	})
	return s
}

// state is what podman knows of a container.
type state struct {
	Running  bool
	ExitCode int
	Pid      int
	Health   string
}

func (s *sidecar) state() state {
	s.t.Helper()
	out := podmantest.Must(s.t, "inspect", "--format", "{{json .State}}", s.name)
	var raw struct {
		Running  bool
		ExitCode int
		Pid      int
		Health   struct{ Status string }
	}
	require.NoError(s.t, json.Unmarshal([]byte(out), &raw), out)
	return state{Running: raw.Running, ExitCode: raw.ExitCode, Pid: raw.Pid, Health: raw.Health.Status}
}

// healthcheck runs the image's HEALTHCHECK once, as the engine's timer
// would (podman healthcheck run); nil when it passed.
func (s *sidecar) healthcheck() error { return podmantest.Healthcheck(s.name) }

// awaitHealthy runs the HEALTHCHECK until it passes and podman reports the
// container healthy, failing early when the container exits.
func (s *sidecar) awaitHealthy() {
	s.t.Helper()
	var last error
	ok := binarytest.Eventually(90*time.Second, func() bool {
		if !s.state().Running {
			return true
		}
		last = s.healthcheck()
		return last == nil
	})
	st := s.state()
	require.True(s.t, st.Running, "container exited (code %d) before it was healthy", st.ExitCode)
	require.True(s.t, ok, "HEALTHCHECK never passed within 90 s: %v", last)
	require.Equal(s.t, "healthy", st.Health, "podman's health status after a passing HEALTHCHECK")
}

// stop is `podman stop` with the grace period: SIGTERM, then SIGKILL once
// grace has passed. It returns how long the container took to exit and its
// exit code.
func (s *sidecar) stop(grace time.Duration) (time.Duration, int) {
	s.t.Helper()
	start := time.Now()
	podmantest.Must(s.t, "stop", "--time", strconv.Itoa(int(grace.Seconds())), s.name)
	took := time.Since(start)
	return took, s.state().ExitCode
}

// kill is `podman kill`: SIGKILL, no warning, as the OOM killer does.
func (s *sidecar) kill() {
	s.t.Helper()
	podmantest.Must(s.t, "kill", "--signal", "KILL", s.name)
	require.True(s.t, binarytest.Eventually(30*time.Second, func() bool { return !s.state().Running }), "container still runs after SIGKILL")
}

// logs is the container's output so far, stdout and stderr together (the
// collector logs to stderr, which podman logs replays on its own stderr).
func (s *sidecar) logs() string {
	s.t.Helper()
	out, err := podmantest.Logs(s.name)
	require.NoError(s.t, err)
	return out
}

// endpoint is host:port of the sidecar's OTLP listener for protocol.
func (w *world) endpoint(protocol string) string {
	if protocol == "http" {
		return fmt.Sprintf("127.0.0.1:%d", w.http)
	}
	return fmt.Sprintf("127.0.0.1:%d", w.grpc)
}
