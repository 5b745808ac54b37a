// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package hostile

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/promtext"
)

// mountSmallDisk mounts a size-limited tmpfs on a fresh directory and
// unmounts it when the test ends (after the sidecar, started later, stopped).
func mountSmallDisk(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a size-limited filesystem as the queue directory needs root (mount(2)); run as root to test a full queue disk")
	}
	dir := t.TempDir()
	require.NoError(t, syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0700"))
	t.Cleanup(func() { assert.NoError(t, syscall.Unmount(dir, syscall.MNT_DETACH)) })
	return dir
}

// fillDisk writes path until the filesystem has no space left.
func fillDisk(t *testing.T, path string) int64 {
	t.Helper()
	f, err := os.Create(path)
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	chunk := make([]byte, 64<<10)
	var written int64
	for {
		n, err := f.Write(chunk)
		written += int64(n)
		if errors.Is(err, syscall.ENOSPC) {
			return written
		}
		require.NoError(t, err)
	}
}

// jobsAndLoad is one OTLP/HTTP request: a cumulative counter at value (one
// series, started at start) and n gauge points.
func jobsAndLoad(t *testing.T, start time.Time, value int64, n int) []byte {
	t.Helper()
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "fulldisk")
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	now := pcommon.NewTimestampFromTime(time.Now())
	jobs := ms.AppendEmpty()
	jobs.SetName("jobs.done")
	sum := jobs.SetEmptySum()
	sum.SetIsMonotonic(true)
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	dp := sum.DataPoints().AppendEmpty()
	dp.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
	dp.SetTimestamp(now)
	dp.SetIntValue(value)
	load := ms.AppendEmpty()
	load.SetName("load")
	pts := load.SetEmptyGauge().DataPoints()
	for i := range n {
		p := pts.AppendEmpty()
		p.SetTimestamp(now)
		p.SetDoubleValue(float64(i % 7))
		p.Attributes().PutInt("i", int64(i%50))
	}
	body, err := (&pmetric.ProtoMarshaler{}).MarshalMetrics(md)
	require.NoError(t, err)
	return body
}

// The queue's volume fills up while CloudWatch is down: another writer
// takes the space, then room is made before CloudWatch comes back, or
// after. (A queue filling a volume smaller than its byte cap itself is a
// known gap: docs/hardened-sidecar.md.)
// When the volume runs low the write reserve is deleted, so that the
// queue can still hand over and delete requests; new data is held in
// memory up to write_failure_buffer_bytes and acknowledged, the rest
// refused with a retryable status; the failure is logged at error naming
// the directory and counted by reason. Once CloudWatch is back, everything
// accepted arrives exactly once and the cumulative counter's deltas add up
// to its last value.
// queueBatch is the shipped sending_queue::batch::flush_timeout.
const queueBatch = 10 * time.Second

func TestFullQueueDiskLosesNothingAccepted(t *testing.T) {
	for _, tc := range []struct {
		name            string
		size            string
		otherWriter     bool
		cloudWatchFirst bool
	}{
		{name: "another writer, room made first", size: "16m", otherWriter: true},
		{name: "another writer, CloudWatch back first", size: "16m", otherWriter: true, cloudWatchFirst: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fullDisk(t, tc.size, tc.otherWriter, tc.cloudWatchFirst)
		})
	}
}

func fullDisk(t *testing.T, size string, otherWriter, cloudWatchFirst bool) {
	dir := mountSmallDisk(t, size)
	cw, err := cloudwatchtest.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = cw.Close() })
	require.NoError(t, cw.SetDown(true))

	s := startSidecar(t, dir,
		"GPUBUILD_CLOUDWATCH_OUTPUT=cloudwatch",
		"GPUBUILD_CLOUDWATCH_ENDPOINT="+cw.Endpoint(),
		"AWS_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=AKIDHOSTILETEST",
		"AWS_SECRET_ACCESS_KEY=hostile-test-secret",
	)
	// The 256 MiB default cap on a 16 MiB volume is said at start.
	require.NoError(t, s.AwaitOutput("The queue's volume is smaller than the queue's byte cap", 30*time.Second))
	url := fmt.Sprintf("http://127.0.0.1:%d/v1/metrics", s.httpPort)
	post := func(body []byte) int {
		resp, err := http.Post(url, "application/x-protobuf", bytes.NewReader(body))
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	const points = 20000
	start := time.Now().Add(-time.Minute)
	var value int64
	accepted, refused := 0, 0
	send := func() {
		value += 3
		switch code := post(jobsAndLoad(t, start, value, points)); code {
		case http.StatusOK:
			accepted++
		case http.StatusServiceUnavailable, http.StatusTooManyRequests:
			refused++
		default:
			t.Fatalf("unexpected answer %d", code)
		}
	}

	for range 5 {
		send() // queued on disk
	}
	require.Equal(t, 5, accepted)
	filler := filepath.Join(dir, "filler")
	if otherWriter {
		filled := fillDisk(t, filler)
		t.Logf("another writer took %d bytes", filled)
	}
	for i := 0; i < 60 && refused < 3; i++ {
		send()
	}
	_, peakKiB, err := binarytest.MemKiB(s.Pid())
	require.NoError(t, err)
	t.Logf("%d-byte requests of %d points: %d accepted, %d refused; peak RSS %d MiB",
		len(jobsAndLoad(t, start, 0, points)), points, accepted, refused, peakKiB/1024)
	assert.Positive(t, refused, "past write_failure_buffer_bytes the data is refused")

	require.NoError(t, s.AwaitOutput("cannot write to its storage", 30*time.Second))
	var line string
	for _, l := range strings.Split(s.Output.String(), "\n") {
		if strings.Contains(l, "cannot write to its storage") {
			line = l
			break
		}
	}
	assert.Contains(t, line, "error")
	assert.Contains(t, line, `"directory": "`+dir+`"`, "the log names the queue directory")
	assert.Contains(t, line, `"reason": "no_space"`)
	samples, err := promtext.Scrape(fmt.Sprintf("127.0.0.1:%d", s.telemetryPort))
	require.NoError(t, err)
	held, _ := samples.Sum("otelcol_exporter_cloudwatch_queue_write_failures", map[string]string{"reason": "no_space", "outcome": "held"})
	refusedPoints, _ := samples.Sum("otelcol_exporter_cloudwatch_queue_write_failures", map[string]string{"reason": "no_space", "outcome": "refused"})
	t.Logf("queue_write_failures{no_space}: held %v, refused %v points", held, refusedPoints)
	assert.Positive(t, held, "data held in memory")
	assert.Positive(t, refusedPoints)

	count := func() (loads int, jobs float64) {
		for _, d := range cw.Datums() {
			switch d.MetricName {
			case "load":
				loads++
			case "jobs.done":
				jobs += *d.Value
			}
		}
		return loads, jobs
	}
	if cloudWatchFirst {
		// The volume is still full: what was queued and what was held
		// arrive all the same. Held data is written only while the queue
		// is empty, one request at a time: each waits for the one before
		// it to leave the sending queue's batch (flush_timeout, 10 s).
		require.NoError(t, cw.SetDown(false))
		want := accepted * points
		require.True(t, binarytest.Eventually(3*time.Minute+time.Duration(accepted)*queueBatch, func() bool { loads, _ := count(); return loads >= want }),
			"with the volume full, delivered %d of %d gauge points", len(cw.Datums()), want)
	}
	if otherWriter {
		require.NoError(t, os.Remove(filler))
	}
	require.NoError(t, cw.SetDown(false))
	// One last request carries the counter's final value (refused ones are
	// covered by it, as a client's retry is).
	value += 3
	last := jobsAndLoad(t, start, value, points)
	require.True(t, binarytest.Eventually(2*time.Minute, func() bool { return post(last) == http.StatusOK }), "the last request is accepted")
	accepted++

	want := accepted * points
	require.True(t, binarytest.Eventually(3*time.Minute, func() bool {
		loads, jobs := count()
		return loads >= want && jobs >= float64(value)
	}), "delivered %d of %d gauge points", len(cw.Datums()), want)
	_, err = s.Stop(60 * time.Second)
	require.NoError(t, err)
	loads, jobs := count()
	assert.Equal(t, want, loads, "every accepted gauge point once")
	assert.Equal(t, float64(value), jobs, "the counter's deltas add up to its last value")
	assert.NotContains(t, s.Output.String(), "Error deleting item from queue")
}
