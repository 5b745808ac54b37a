// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package hostile

import (
	"bytes"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
)

// CloudWatch is down and clients keep sending: the persistent queue stops
// taking data at GPUBUILD_QUEUE_BYTES, refusing the rest with a retryable
// status instead of growing with the outage; once CloudWatch is back,
// everything accepted is delivered exactly once.
func TestQueueIsCappedInBytes(t *testing.T) {
	const capBytes = 4 << 20
	cw, err := cloudwatchtest.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = cw.Close() })
	require.NoError(t, cw.SetDown(true))

	s := startSidecar(t, t.TempDir(),
		"GPUBUILD_CLOUDWATCH_OUTPUT=cloudwatch",
		"GPUBUILD_CLOUDWATCH_ENDPOINT="+cw.Endpoint(),
		"AWS_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=AKIDHOSTILETEST",
		"AWS_SECRET_ACCESS_KEY=hostile-test-secret",
		fmt.Sprintf("GPUBUILD_QUEUE_BYTES=%d", capBytes),
	)
	body, points := maximalRequest(t, 512<<10)
	url := fmt.Sprintf("http://127.0.0.1:%d/v1/metrics", s.httpPort)
	accepted, refused := 0, 0
	for range 40 {
		resp, err := http.Post(url, "application/x-protobuf", bytes.NewReader(body))
		require.NoError(t, err)
		_ = resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			accepted++
		case http.StatusServiceUnavailable, http.StatusTooManyRequests:
			refused++
		default:
			t.Fatalf("unexpected answer %s", resp.Status)
		}
	}
	t.Logf("%d-byte requests of %d points: %d accepted, %d refused; queue cap %d bytes", len(body), points, accepted, refused, capBytes)
	assert.Positive(t, refused, "past the cap new data is refused")
	assert.Positive(t, accepted)
	assert.LessOrEqual(t, accepted*len(body), 2*capBytes, "what was taken is bounded by the cap")

	require.NoError(t, cw.SetDown(false))
	want := accepted * points
	require.True(t, binarytest.Eventually(3*time.Minute, func() bool { return len(cw.WorkloadDatums()) >= want }),
		"delivered %d of %d", len(cw.WorkloadDatums()), want)
	_, err = s.Stop(60 * time.Second)
	require.NoError(t, err)
	assert.Len(t, cw.WorkloadDatums(), want, "nothing accepted lost or sent twice")
}
