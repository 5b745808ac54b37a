// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package compose

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/exact"
)

// client drives the build service's API through the published port.
type client struct {
	t    *testing.T
	base string
}

// truth is what the service process counted itself (GET /_truth): runs by
// result, requests by "route METHOD class".
type truth struct {
	Jobs     map[string]int `json:"jobs"`
	Requests map[string]int `json:"requests"`
}

func (tr truth) add(o truth) truth {
	out := truth{Jobs: map[string]int{}, Requests: map[string]int{}}
	for _, m := range []truth{tr, o} {
		for k, v := range m.Jobs {
			out.Jobs[k] += v
		}
		for k, v := range m.Requests {
			out.Requests[k] += v
		}
	}
	return out
}

func (c *client) truth() (truth, error) {
	var tr truth
	resp, err := http.Get(c.base + "/_truth")
	if err != nil {
		return tr, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return tr, fmt.Errorf("GET /_truth: %s", resp.Status)
	}
	return tr, json.NewDecoder(resp.Body).Decode(&tr)
}

// awaitAnswers waits until the service answers through the published port.
func (c *client) awaitAnswers() {
	c.t.Helper()
	var last error
	ok := binarytest.Eventually(60*time.Second, func() bool { _, last = c.truth(); return last == nil })
	require.True(c.t, ok, "the service never answered on %s: %v", c.base, last)
}

// wave submits n builds (every fifth fails at gpu_build) and one the
// service refuses, polls each until it ended, and flushes the SDK
// (POST /_flush answers once the sidecar took everything). It returns the
// service's truth, checked against what the test saw.
func (c *client) wave(tag string, n int) truth {
	t := c.t
	t.Helper()
	want := map[string]string{}
	results := map[string]int{}
	for i := range n {
		body := map[string]any{"vector_path": fmt.Sprintf("s3://vectors/%s/%d.knnvec", tag, i), "tenant_id": "tenant-a"}
		result := "COMPLETED"
		if i%5 == 4 {
			body["fail_at"] = "gpu_build"
			result = "FAILED"
		}
		var out struct {
			JobID string `json:"job_id"`
		}
		require.Equal(t, http.StatusOK, c.post("/_build", body, &out))
		want[out.JobID] = result
		results[map[string]string{"COMPLETED": "success", "FAILED": "failure"}[result]]++
	}
	require.Equal(t, http.StatusBadRequest, c.post("/_build", map[string]any{"vector_path": "x"}, nil))
	for id, status := range want {
		var last string
		ok := binarytest.Eventually(60*time.Second, func() bool {
			var out struct {
				TaskStatus string `json:"task_status"`
			}
			resp, err := http.Get(c.base + "/_status/" + id)
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			_ = json.NewDecoder(resp.Body).Decode(&out)
			last = out.TaskStatus
			return last == status
		})
		require.True(t, ok, "job %s: %q, never %s", id, last, status)
	}
	require.Equal(t, http.StatusNoContent, c.post("/_flush", nil, nil), "the SDK's flush into the sidecar")
	tr, err := c.truth()
	require.NoError(t, err)
	require.Equal(t, results, tr.Jobs, "runs: the service's count vs the test's")
	require.Equal(t, n+1, tr.Requests["/_build POST 2xx"]+tr.Requests["/_build POST 4xx"], "POST /_build requests the service counted")
	return tr
}

func (c *client) post(path string, body any, out any) int {
	c.t.Helper()
	var b []byte
	if body != nil {
		var err error
		b, err = json.Marshal(body)
		require.NoError(c.t, err)
	}
	resp, err := http.Post(c.base+path, "application/json", bytes.NewReader(b))
	require.NoError(c.t, err)
	defer resp.Body.Close()
	if out != nil {
		require.NoError(c.t, json.NewDecoder(resp.Body).Decode(out))
	}
	return resp.StatusCode
}

// mismatches compares what landed for the service with its truth:
// build.jobs by result and api.requests by route, method and status class,
// and each metric's total (nothing beyond the truth).
func mismatches(datums []cloudwatchtest.Datum, service string, tr truth) []string {
	var out []string
	check := func(metric string, dims map[string]string, want int) {
		dims["service.name"] = service
		if got := exact.Sum(datums, metric, dims); got != float64(want) {
			out = append(out, fmt.Sprintf("%s%v: landed %v, truth %d", metric, dims, got, want))
		}
	}
	var jobs, requests int
	for result, n := range tr.Jobs {
		check("build.jobs", map[string]string{"build.result": result}, n)
		jobs += n
	}
	for key, n := range tr.Requests {
		f := strings.Fields(key)
		if len(f) != 3 {
			out = append(out, "unexpected truth key "+key)
			continue
		}
		check("api.requests", map[string]string{"http.route": f[0], "http.request.method": f[1], "http.response.status_class": f[2]}, n)
		requests += n
	}
	check("build.jobs", map[string]string{}, jobs)
	check("api.requests", map[string]string{}, requests)
	return out
}

// awaitExact waits until what landed equals the truth; then, for hold, it
// requires it to stay equal: anything sent twice would land within a flush
// or two of the rest.
func awaitExact(t *testing.T, cw *cloudwatchtest.Server, service string, tr truth, timeout, hold time.Duration) {
	t.Helper()
	var last []string
	ok := binarytest.Eventually(timeout, func() bool {
		last = mismatches(cw.Datums(), service, tr)
		return len(last) == 0
	})
	require.True(t, ok, "landed != truth after %v:\n  %s", timeout, strings.Join(last, "\n  "))
	if hold > 0 {
		changed := binarytest.Eventually(hold, func() bool {
			last = mismatches(cw.Datums(), service, tr)
			return len(last) > 0
		})
		require.False(t, changed, "landed != truth within %v of being equal:\n  %s", hold, strings.Join(last, "\n  "))
	}
}
