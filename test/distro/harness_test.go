package distro

import (
	"github.com/gpubuild/otelcol-gpubuild/test/internal/binarytest"

	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// sidecar is the built collector running the default otelcol-config.yaml on
// free ports, with no AWS credentials reachable (dry run).
type sidecar struct {
	cmd      *exec.Cmd
	output   *binarytest.Buffer // stdout and stderr
	stdout   *binarytest.Buffer // the dry-run destination writes here
	done     chan error
	httpPort int
	health   string
}

// cleanEnv is the environment of a machine with no AWS account: nothing from
// the test runner's AWS settings leaks in, and no metadata service is asked.
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

func startSidecar(t *testing.T, extraEnv ...string) *sidecar {
	t.Helper()
	s := &sidecar{output: &binarytest.Buffer{}, stdout: &binarytest.Buffer{}, done: make(chan error, 1), httpPort: binarytest.FreePort(t)}
	healthPort := binarytest.FreePort(t)
	s.health = fmt.Sprintf("http://127.0.0.1:%d/", healthPort)
	env := append(cleanEnv(t),
		"GPUBUILD_OTLP_GRPC_PORT="+strconv.Itoa(binarytest.FreePort(t)),
		"GPUBUILD_OTLP_HTTP_PORT="+strconv.Itoa(s.httpPort),
		"GPUBUILD_HEALTH_PORT="+strconv.Itoa(healthPort),
		"GPUBUILD_TELEMETRY_PORT="+strconv.Itoa(binarytest.FreePort(t)),
		"GPUBUILD_QUEUE_DIR="+t.TempDir(),
		"GPUBUILD_FLUSH_INTERVAL=1s",
		"GPUBUILD_GPU_COLLECTION_INTERVAL=1s",
	)
	s.cmd = exec.Command(binarytest.Binary(t), "--config", filepath.Join(binarytest.RepoRoot(), "otelcol-config.yaml"))
	s.cmd.Env = append(env, extraEnv...)
	s.cmd.Stdout, s.cmd.Stderr = io.MultiWriter(s.output, s.stdout), s.output
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, s.cmd.Start())
	go func() { s.done <- s.cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		if t.Failed() {
			t.Logf("collector output:\n%s", s.output.String())
		}
	})
	s.waitHealthy(t, 30*time.Second)
	return s
}

func (s *sidecar) healthy() bool {
	resp, err := http.Get(s.health)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func (s *sidecar) waitHealthy(t *testing.T, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case err := <-s.done:
			t.Fatalf("collector exited before becoming healthy: %v\n%s", err, s.output.String())
		default:
		}
		if s.healthy() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("collector not healthy on %s after %s\n%s", s.health, timeout, s.output.String())
}

// waitOutput waits until the collector's output contains want.
func (s *sidecar) waitOutput(t *testing.T, want string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if strings.Contains(s.output.String(), want) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("collector output has no %q after %s:\n%s", want, timeout, s.output.String())
}

// terminate sends SIGTERM and returns the exit error (nil for exit code 0).
func (s *sidecar) terminate(t *testing.T, timeout time.Duration) error {
	t.Helper()
	require.NoError(t, s.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-s.done:
		return err
	case <-time.After(timeout):
		t.Fatalf("collector still running %s after SIGTERM\n%s", timeout, s.output.String())
		return nil
	}
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
