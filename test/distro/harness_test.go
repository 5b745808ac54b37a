package distro

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// repoRoot is the checkout root; the tests run in test/distro.
func repoRoot(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// binary returns the built distribution; the Makefile's test target builds it first.
func binary(t *testing.T) string {
	bin := filepath.Join(repoRoot(t), "bin", "otelcol-gpubuild")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s not found: run `make build` (make test does it for you)", bin)
	}
	return bin
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// syncBuffer collects a subprocess's output while tests read it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// sidecar is the built collector running the default otelcol-config.yaml on
// free ports, with no AWS credentials reachable (dry run).
type sidecar struct {
	cmd      *exec.Cmd
	output   *syncBuffer // stdout and stderr
	stdout   *syncBuffer // the dry-run destination writes here
	done     chan error
	httpPort int
	health   string
}

// cleanEnv is the environment of a machine with no AWS account: nothing from
// the test runner's AWS settings leaks in, and no metadata service is asked.
func cleanEnv(t *testing.T) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "AWS_") || strings.HasPrefix(kv, "GPUBUILD_") {
			continue
		}
		env = append(env, kv)
	}
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
	s := &sidecar{output: &syncBuffer{}, stdout: &syncBuffer{}, done: make(chan error, 1), httpPort: freePort(t)}
	healthPort := freePort(t)
	s.health = fmt.Sprintf("http://127.0.0.1:%d/", healthPort)
	env := append(cleanEnv(t),
		"GPUBUILD_OTLP_GRPC_PORT="+strconv.Itoa(freePort(t)),
		"GPUBUILD_OTLP_HTTP_PORT="+strconv.Itoa(s.httpPort),
		"GPUBUILD_HEALTH_PORT="+strconv.Itoa(healthPort),
		"GPUBUILD_TELEMETRY_PORT="+strconv.Itoa(freePort(t)),
		"GPUBUILD_QUEUE_DIR="+t.TempDir(),
		"GPUBUILD_FLUSH_INTERVAL=1s",
		"GPUBUILD_GPU_COLLECTION_INTERVAL=1s",
	)
	s.cmd = exec.Command(binary(t), "--config", filepath.Join(repoRoot(t), "otelcol-config.yaml"))
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
	cmd := exec.CommandContext(ctx, binary(t), args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return string(out), err
}
