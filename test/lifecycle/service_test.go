// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
)

// service is one process of the Node.js build service (test/jsservice).
type service struct {
	t      *testing.T
	name   string
	port   int
	cmd    *exec.Cmd
	output *binarytest.Buffer
	done   chan struct{}
	err    error
}

// serviceOptions are the SDK settings a scenario changes; zero values keep
// the SDK's defaults (gRPC, metrics every 60 s).
type serviceOptions struct {
	HTTPProtobuf   bool
	MetricInterval time.Duration
	// ScheduledBatches: spans and log records leave only on the SDK's 5 s
	// schedule, not whenever 512 of them are waiting, so that no batch is
	// sent while the collector restarts: the SDK drops a batch it cannot
	// send then, which is the SDK's loss, not the collector's.
	ScheduledBatches bool
	// SpanDelay, LogDelay: how long the SDK's span and log record batches
	// wait before they are sent (OTEL_BSP_SCHEDULE_DELAY,
	// OTEL_BLRP_SCHEDULE_DELAY; the JS SDK's defaults are 5 s and 1 s).
	SpanDelay, LogDelay time.Duration
}

// startService runs the service exporting to the env's collector ports and
// waits until it answers. The collector need not be up.
func (e *env) startService(name string, o serviceOptions) *service {
	t := e.t
	t.Helper()
	dir := repoPath("test/jsservice")
	if _, err := os.Stat(dir + "/node_modules/@opentelemetry/sdk-node"); err != nil {
		t.Fatalf("test/jsservice/node_modules missing: run `make jsservice-deps` (npm ci; `make test` runs it)")
	}
	s := &service{t: t, name: name, port: binarytest.FreePort(t), output: &binarytest.Buffer{}, done: make(chan struct{})}
	s.cmd = exec.Command("node", "service.js")
	s.cmd.Dir = dir
	s.cmd.Env = append(binarytest.EnvWithout("OTEL_", "PORT="),
		"PORT="+strconv.Itoa(s.port),
		"OTEL_SERVICE_NAME="+name,
		// The SDK's export failures (silent by default) show in a failed
		// test's service output.
		"OTEL_LOG_LEVEL=warn",
		"OTEL_EXPORTER_OTLP_PROTOCOL=grpc",
		fmt.Sprintf("OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:%d", e.grpc),
	)
	if o.HTTPProtobuf {
		s.cmd.Env = append(s.cmd.Env, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
			fmt.Sprintf("OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:%d", e.http))
	}
	if o.ScheduledBatches {
		s.cmd.Env = append(s.cmd.Env, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE=100000", "OTEL_BSP_MAX_QUEUE_SIZE=100000",
			"OTEL_BLRP_MAX_EXPORT_BATCH_SIZE=100000", "OTEL_BLRP_MAX_QUEUE_SIZE=100000")
	}
	if o.SpanDelay > 0 {
		s.cmd.Env = append(s.cmd.Env, "OTEL_BSP_SCHEDULE_DELAY="+strconv.FormatInt(o.SpanDelay.Milliseconds(), 10))
	}
	if o.LogDelay > 0 {
		s.cmd.Env = append(s.cmd.Env, "OTEL_BLRP_SCHEDULE_DELAY="+strconv.FormatInt(o.LogDelay.Milliseconds(), 10))
	}
	if o.MetricInterval > 0 {
		s.cmd.Env = append(s.cmd.Env, "OTEL_METRIC_EXPORT_INTERVAL="+strconv.FormatInt(o.MetricInterval.Milliseconds(), 10))
	}
	s.cmd.Stdout, s.cmd.Stderr = s.output, s.output
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, s.cmd.Start())
	go func() { s.err = s.cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
		if t.Failed() {
			t.Logf("service %s output (tail):\n%s", name, binarytest.Tail(s.output.String(), 3000))
		}
	})
	await(t, 60*time.Second, "service answers", func() (bool, string) {
		select {
		case <-s.done:
			t.Fatalf("service exited: %v\n%s", s.err, s.output.String())
		default:
		}
		_, err := s.truth()
		return err == nil, fmt.Sprint(err)
	})
	return s
}

// stop sends SIGTERM: the service flushes its SDK (the last spans, records
// and the final cumulative metrics) and exits.
func (s *service) stop() {
	s.t.Helper()
	require.NoError(s.t, s.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-s.done:
	case <-time.After(60 * time.Second):
		s.t.Fatalf("service did not exit within 60s of SIGTERM:\n%s", binarytest.Tail(s.output.String(), 3000))
	}
	require.NoError(s.t, s.err, "service exit:\n%s", binarytest.Tail(s.output.String(), 3000))
}

// serviceTruth is what the service counted itself.
type serviceTruth struct {
	Jobs     map[string]int `json:"jobs"`
	Requests map[string]int `json:"requests"`
}

func (s *service) truth() (serviceTruth, error) {
	var tr serviceTruth
	resp, err := http.Get(s.url("/_truth"))
	if err != nil {
		return tr, err
	}
	defer resp.Body.Close()
	return tr, json.NewDecoder(resp.Body).Decode(&tr)
}

// flush makes the SDK send the spans and log records in its batches now
// and waits until it has (or has given up).
func (s *service) flush() {
	s.t.Helper()
	resp, err := http.Post(s.url("/_flush"), "", nil)
	require.NoError(s.t, err)
	resp.Body.Close()
	require.Equal(s.t, http.StatusNoContent, resp.StatusCode, "flush")
}

func (s *service) url(path string) string { return fmt.Sprintf("http://127.0.0.1:%d%s", s.port, path) }

// tally is the truth the test works out from the requests it sent: runs
// by the result each request asked for, requests by the route, method and
// status class each got.
type tally struct {
	mu       sync.Mutex
	seq      int
	Jobs     map[string]int
	Requests map[string]int
	// Recounted are requests api.requests may count a second time by
	// design (the upgrade from a release without derivation state); the
	// histograms must still land exactly Requests.
	Recounted map[string]int
	// Resendable is how much more than Requests the pass-through histogram
	// counts may land: what a kill -9 may send twice (see resendableSoFar).
	Resendable map[string]int
}

func newTally() *tally {
	return &tally{Jobs: map[string]int{}, Requests: map[string]int{}, Recounted: map[string]int{}, Resendable: map[string]int{}}
}

// resendableSoFar is called before a kill -9: the exporter may send again
// what CloudWatch answered in the instant before the kill, before its
// record of the answer (docs/guarantees.md). The queue has one consumer
// and each OTLP request is one item, so that is at most one datum per
// series, the delta since the series' previous export: no more than the
// requests made so far.
func (tr *tally) resendableSoFar() {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for k, v := range tr.Requests {
		tr.Resendable[k] += v
	}
}

// recountSoFar marks every request made so far as counted twice in
// api.requests.
func (tr *tally) recountSoFar() {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	maps.Copy(tr.Recounted, tr.Requests)
}

// apiRequests is what api.requests must land: each request once, those
// in Recounted twice.
func (tr *tally) apiRequests() map[string]int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	out := maps.Clone(tr.Requests)
	for k, v := range tr.Recounted {
		out[k] += v
	}
	return out
}

func (tr *tally) request(route, method string, status int) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.Requests[requestKey(route, method, strconv.Itoa(status/100)+"xx")]++
}

func (tr *tally) next() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.seq++
	return tr.seq
}

// build posts one job; every fifth fails at gpu_build. It returns the job
// id and the result the run will have.
func (s *service) build(tr *tally) (id, result string) {
	t := s.t
	n := tr.next()
	body := map[string]any{"vector_path": fmt.Sprintf("s3://vectors/%s/%d.knnvec", s.name, n), "tenant_id": "tenant-a"}
	result = "success"
	if n%5 == 0 {
		body["fail_at"] = "gpu_build"
		result = "failure"
	}
	resp, err := http.Post(s.url("/_build"), "application/json", writeJSON(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	tr.request("/_build", http.MethodPost, resp.StatusCode)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var out struct {
		JobID string `json:"job_id"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return out.JobID, result
}

// badBuild posts a request the service refuses (400): no run.
func (s *service) badBuild(tr *tally) {
	resp, err := http.Post(s.url("/_build"), "application/json", writeJSON(map[string]any{"vector_path": "x"}))
	require.NoError(s.t, err)
	resp.Body.Close()
	tr.request("/_build", http.MethodPost, resp.StatusCode)
	require.Equal(s.t, http.StatusBadRequest, resp.StatusCode)
}

// status polls GET /_status/:job_id once.
func (s *service) status(tr *tally, id string) string {
	resp, err := http.Get(s.url("/_status/" + id))
	require.NoError(s.t, err)
	defer resp.Body.Close()
	tr.request("/_status/:job_id", http.MethodGet, resp.StatusCode)
	var out struct {
		TaskStatus string `json:"task_status"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return out.TaskStatus
}

// wave submits n jobs and one refused request, then polls each job's
// status until it ended, as a client of the service does. The runs are
// added to the tally when their end is seen.
func (s *service) wave(tr *tally, n int) {
	t := s.t
	t.Helper()
	type job struct{ id, result string }
	jobs := make([]job, 0, n)
	for range n {
		id, result := s.build(tr)
		jobs = append(jobs, job{id, result})
	}
	s.badBuild(tr)
	for _, j := range jobs {
		want := map[string]string{"success": "COMPLETED", "failure": "FAILED"}[j.result]
		ok := await(t, 60*time.Second, "job "+j.id+" ended", func() (bool, string) {
			st := s.status(tr, j.id)
			return st == want, st
		})
		require.True(t, ok, "job %s never reached %s", j.id, want)
		tr.mu.Lock()
		tr.Jobs[j.result]++
		tr.mu.Unlock()
	}
}

// checkServiceTruth compares the service's own count with the test's: they
// must agree before what landed is compared with either.
func (s *service) checkServiceTruth(tr *tally) {
	s.t.Helper()
	got, err := s.truth()
	require.NoError(s.t, err)
	tr.mu.Lock()
	defer tr.mu.Unlock()
	require.Equal(s.t, tr.Jobs, got.Jobs, "runs: the service's count vs the test's")
	require.Equal(s.t, tr.Requests, got.Requests, "requests: the service's count vs the test's")
}

// merged is the truth of several service processes together.
func merged(ts ...*tally) *tally {
	out := newTally()
	for _, tr := range ts {
		for k, v := range tr.Jobs {
			out.Jobs[k] += v
		}
		for k, v := range tr.Requests {
			out.Requests[k] += v
		}
		for k, v := range tr.Recounted {
			out.Recounted[k] += v
		}
	}
	return out
}
