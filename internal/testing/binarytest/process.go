// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package binarytest

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Process is one run of a binary in its own process group, so that killing
// it also kills anything it started.
type Process struct {
	cmd *exec.Cmd
	// Output is stdout and stderr together; Stdout is stdout alone (the
	// dry-run destination writes there).
	Output, Stdout *Buffer
	done           chan struct{}
	err            error // the exit error, once done is closed
}

// Start runs argv with exactly the environment env. keep > 0 holds only
// the last keep bytes of output (long runs); 0 holds all of it.
func Start(argv, env []string, keep int) (*Process, error) {
	p := &Process{Output: &Buffer{Keep: keep}, Stdout: &Buffer{Keep: keep}, done: make(chan struct{})}
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Env = env
	p.cmd.Stdout = multiWriter{p.Output, p.Stdout}
	p.cmd.Stderr = p.Output
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// StartBinary runs the built distribution with args, for the length of the
// test: the process group is killed at cleanup, and the end of the output
// is logged when the test failed.
func StartBinary(t testing.TB, env []string, args ...string) *Process {
	t.Helper()
	return StartBinaryAt(t, Binary(t), env, args...)
}

// StartBinaryAt is StartBinary for another build of the collector, at bin
// (a previous release, for upgrade tests).
func StartBinaryAt(t testing.TB, bin string, env []string, args ...string) *Process {
	t.Helper()
	p, err := Start(append([]string{bin}, args...), env, 0)
	require.NoError(t, err)
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("collector output (last 6000 bytes):\n%s", Tail(p.Output.String(), 6000))
		}
	})
	return p
}

// Pid is the process's id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited tells whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Err is the exit error (nil for exit code 0); valid once Exited.
func (p *Process) Err() error { return p.err }

// Stop sends SIGTERM and waits up to timeout for the exit. It returns how
// long the exit took and the exit error; past timeout it kills the group
// and says so.
func (p *Process) Stop(timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		if diedOf(p.err, syscall.SIGTERM) {
			// A collector that handles SIGTERM exits with a status, never
			// by the signal; otelcol installs its handler only after every
			// component started (and the health check turned ready), so a
			// SIGTERM in between ends the process as kill -9 would.
			return time.Since(start), fmt.Errorf("%w: %w", p.err, ErrSIGTERMBeforeHandler)
		}
		return time.Since(start), p.err
	case <-time.After(timeout):
		p.Kill()
		return time.Since(start), fmt.Errorf("no exit within %v of SIGTERM:\n%s", timeout, Tail(p.Output.String(), 6000))
	}
}

// StopSoonAfterReady stops a process that only just turned ready. A
// SIGTERM that soon can come before otelcol installs its signal handler
// (after every component started), which ends the process as kill -9
// would: for a test that stops it only to go on, that is as good as a
// clean exit; any other failure to stop is returned.
func (p *Process) StopSoonAfterReady(timeout time.Duration) error {
	if _, err := p.Stop(timeout); err != nil && !errors.Is(err, ErrSIGTERMBeforeHandler) {
		return err
	}
	return nil
}

// ErrSIGTERMBeforeHandler is in Stop's error when the process died of the
// SIGTERM, which a collector does only before otelcol installs its signal
// handler (after every component started): it ended as kill -9 would.
var ErrSIGTERMBeforeHandler = errors.New("the SIGTERM came before the collector's signal handler was installed")

// diedOf tells whether err is the exit of a process killed by sig.
func diedOf(err error, sig syscall.Signal) bool {
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return false
	}
	ws, ok := exit.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

// Kill9 kills the process without warning, as the OOM killer would, and
// waits for it.
func (p *Process) Kill9() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Kill kills the whole process group and waits for the process.
func (p *Process) Kill() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// AwaitHealthy waits until url answers 200, failing early when the process
// exits.
func (p *Process) AwaitHealthy(url string, timeout time.Duration) error {
	return p.await(timeout, "healthy on "+url, func() bool { return Healthy(url) })
}

// AwaitListening waits until something accepts connections on addr.
func (p *Process) AwaitListening(addr string, timeout time.Duration) error {
	return p.await(timeout, "listening on "+addr, func() bool {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			return false
		}
		_ = c.Close()
		return true
	})
}

// AwaitOutput waits until the output contains want.
func (p *Process) AwaitOutput(want string, timeout time.Duration) error {
	return p.await(timeout, fmt.Sprintf("output with %q", want), func() bool {
		return strings.Contains(p.Output.String(), want)
	})
}

func (p *Process) await(timeout time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return nil
		}
		if p.Exited() {
			return fmt.Errorf("exited (%v) before %s:\n%s", p.err, what, Tail(p.Output.String(), 6000))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not %s after %v:\n%s", what, timeout, Tail(p.Output.String(), 6000))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Healthy tells whether url answers 200.
func Healthy(url string) bool {
	client := http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Eventually polls cond every 100 ms until it holds or timeout passes, and
// returns whether it held; the caller asserts with a useful message.
func Eventually(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Tail is the last n bytes of s.
func Tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// multiWriter writes to every buffer (they never fail).
type multiWriter []*Buffer

func (m multiWriter) Write(b []byte) (int, error) {
	for _, w := range m {
		if _, err := w.Write(b); err != nil {
			return 0, err
		}
	}
	return len(b), nil
}
