// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package hostile

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
)

// podMemoryLimitMiB reads the sidecar container's memory limit from the
// shipped pod manifest, so the test follows the manifest.
func podMemoryLimitMiB(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(binarytest.RepoRoot(), "deploy", "kubernetes", "pod.yaml"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?s)name: otelcol-gpubuild.*?limits:\s*\n\s*memory:\s*(\d+)Mi`).FindSubmatch(b)
	require.NotNil(t, m, "the sidecar's memory limit in deploy/kubernetes/pod.yaml")
	v, err := strconv.ParseInt(string(m[1]), 10, 64)
	require.NoError(t, err)
	return v
}

// podEnv is the value of name in the sidecar container's env in the
// shipped pod manifest.
func podEnv(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(binarytest.RepoRoot(), "deploy", "kubernetes", "pod.yaml"))
	require.NoError(t, err)
	m := regexp.MustCompile(`- name: ` + regexp.QuoteMeta(name) + `\s*\n\s*value: "?([^"\n]+)"?`).FindSubmatch(b)
	require.NotNil(t, m, "%s in deploy/kubernetes/pod.yaml", name)
	return string(m[1])
}

// defaultMaxRequestBytes is the OTLP/HTTP request bound of the shipped config.
func defaultMaxRequestBytes(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(binarytest.RepoRoot(), "otelcol-config.yaml"))
	require.NoError(t, err)
	m := regexp.MustCompile(`GPUBUILD_OTLP_MAX_REQUEST_BYTES:-(\d+)`).FindSubmatch(b)
	require.NotNil(t, m)
	v, err := strconv.Atoi(string(m[1]))
	require.NoError(t, err)
	return v
}

// maximalRequest is an OTLP/HTTP protobuf body just under limit bytes made
// of the smallest points, the shape that costs the most memory per byte
// once decoded, and its number of points.
func maximalRequest(t *testing.T, limit int) ([]byte, int) {
	t.Helper()
	build := func(n int) []byte {
		md := pmetric.NewMetrics()
		rm := md.ResourceMetrics().AppendEmpty()
		rm.Resource().Attributes().PutStr("service.name", "flood")
		g := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
		g.SetName("load")
		pts := g.SetEmptyGauge().DataPoints()
		now := pcommon.NewTimestampFromTime(time.Now())
		for i := range n {
			dp := pts.AppendEmpty()
			dp.SetTimestamp(now)
			dp.SetDoubleValue(float64(i % 7))
			dp.Attributes().PutInt("i", int64(i%50))
		}
		body, err := (&pmetric.ProtoMarshaler{}).MarshalMetrics(md)
		require.NoError(t, err)
		return body
	}
	per := len(build(1000)) / 1000
	n := (limit - 4096) / per
	body := build(n)
	for len(body) > limit {
		n -= 1000
		body = build(n)
	}
	return body, n
}

// Eight clients send maximal requests (just under the request bound) at once,
// three rounds each: the sidecar's peak resident memory stays under the
// shipped pod's memory limit, every request is answered (accepted, or
// refused with a retryable status by the memory limiter), and what was
// accepted reaches CloudWatch.
func TestParallelMaximalRequestsStayUnderThePodLimit(t *testing.T) {
	limitMiB := podMemoryLimitMiB(t)
	cw, s := startPodSidecar(t)
	body, points := maximalRequest(t, defaultMaxRequestBytes(t))
	t.Logf("request: %d bytes, %d points", len(body), points)

	peakKiB := binarytest.SampleMem(s.Pid(), 20*time.Millisecond)

	const clients, rounds = 8, 3
	url := fmt.Sprintf("http://127.0.0.1:%d/v1/metrics", s.httpPort)
	var accepted, refused atomic.Int64
	var unexpected sync.Map
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := &http.Client{Timeout: 2 * time.Minute}
			for range rounds {
				resp, err := client.Post(url, "application/x-protobuf", bytes.NewReader(body))
				if err != nil {
					unexpected.Store(err.Error(), true)
					continue
				}
				_ = resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusOK:
					accepted.Add(1)
				case http.StatusTooManyRequests, http.StatusServiceUnavailable:
					refused.Add(1)
				default:
					unexpected.Store(resp.Status, true)
				}
			}
		}()
	}
	wg.Wait()

	want := int(accepted.Load()) * points
	delivered := binarytest.Eventually(3*time.Minute, func() bool { return len(cw.WorkloadDatums()) >= want })

	peakMiB := peakKiB().HWM / 1024
	t.Logf("accepted %d, refused %d of %d requests; peak RSS %d MiB (pod limit %d MiB); %d datums delivered",
		accepted.Load(), refused.Load(), clients*rounds, peakMiB, limitMiB, len(cw.WorkloadDatums()))
	unexpected.Range(func(k, _ any) bool { t.Errorf("unexpected answer: %v", k); return true })
	assert.Positive(t, accepted.Load(), "the sidecar accepts data under the flood")
	assert.Less(t, peakMiB, limitMiB, "peak RSS under the pod's memory limit")
	assert.True(t, delivered, "what was accepted reaches CloudWatch")
	assert.Len(t, cw.WorkloadDatums(), want, "nothing accepted is lost or sent twice")
	assert.True(t, binarytest.Healthy(s.health))
}

// startPodSidecar runs the sidecar as the shipped pod does (its GOMEMLIMIT)
// against a local CloudWatch endpoint.
func startPodSidecar(t *testing.T) (*cloudwatchtest.Server, *sidecar) {
	t.Helper()
	cw, err := cloudwatchtest.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = cw.Close() })
	s := startSidecar(t, t.TempDir(),
		"GPUBUILD_CLOUDWATCH_OUTPUT=cloudwatch",
		"GOMEMLIMIT="+podEnv(t, "GOMEMLIMIT"),
		"GPUBUILD_CLOUDWATCH_ENDPOINT="+cw.Endpoint(),
		"AWS_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=AKIDHOSTILETEST",
		"AWS_SECRET_ACCESS_KEY=hostile-test-secret",
	)
	return cw, s
}
