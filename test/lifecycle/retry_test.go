// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A client retries a failed build at once under the same job id (the
// service's id is a hash of path and tenant), until it succeeds: three
// runs of one id within milliseconds of each other, the earlier runs'
// spans and status records still in the SDK's batches beside the later
// run's. Each run is counted once, with its own result.
func TestLifecycleRetriedBuilds(t *testing.T) {
	retriedBuilds(t, "lifecycle-retried", serviceOptions{}, "download", "gpu_build", "")
}

// The first run of a build fails before its build (and its span) begins,
// the retry succeeds at once; the SDK sends spans every 200 ms and status
// records every 3 s, so the retry's span arrives before the status records
// of both runs. The first run's start record, placed by time, first joins
// the retry's run; its end record, written before that span began, takes
// it back. (Before: both runs counted as the retry's success.)
func TestLifecycleRetriedBuildWithoutSpanBeforeItsRetrysSpan(t *testing.T) {
	opts := serviceOptions{SpanDelay: 200 * time.Millisecond, LogDelay: 3 * time.Second}
	retriedBuilds(t, "lifecycle-retried-nospan", opts, "before_build", "")
}

// retriedBuilds runs ten builds, each through the runs failAt lists (see
// retried), and awaits exactly those runs and requests.
func retriedBuilds(t *testing.T, name string, opts serviceOptions, failAt ...string) {
	e := newEnv(t)
	e.startCollector(binary(t))
	svc := e.startService(name, opts)
	tr := newTally()
	for range 10 {
		svc.retried(tr, failAt...)
	}
	svc.checkServiceTruth(tr)
	svc.stop()
	e.awaitExact(name, tr, scenarioDeadline)
}

// retried builds one vector path once per entry of failAt (the stage that
// fails; "" succeeds), each run posted as soon as the previous one ended.
func (s *service) retried(tr *tally, failAt ...string) {
	t := s.t
	t.Helper()
	path := fmt.Sprintf("s3://vectors/%s/%d.knnvec", s.name, tr.next())
	var jobID string
	for _, stage := range failAt {
		body := map[string]any{"vector_path": path, "tenant_id": "tenant-a"}
		result, want := "success", "COMPLETED"
		if stage != "" {
			body["fail_at"] = stage
			result, want = "failure", "FAILED"
		}
		resp, err := http.Post(s.url("/_build"), "application/json", writeJSON(body))
		require.NoError(t, err)
		tr.request("/_build", http.MethodPost, resp.StatusCode)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var out struct {
			JobID string `json:"job_id"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		resp.Body.Close()
		if jobID != "" {
			require.Equal(t, jobID, out.JobID, "a retry of one path has the path's job id")
		}
		jobID = out.JobID
		ok := await(t, 60*time.Second, "job "+jobID+" ended", func() (bool, string) {
			st := s.status(tr, jobID)
			return st == want, st
		})
		require.True(t, ok, "job %s never reached %s", jobID, want)
		tr.mu.Lock()
		tr.Jobs[result]++
		tr.mu.Unlock()
	}
}
