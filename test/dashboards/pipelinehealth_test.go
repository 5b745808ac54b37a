// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package dashboards

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
)

// healthInterval is GPUBUILD_PIPELINE_TELEMETRY_INTERVAL in these tests.
const healthInterval = 3 * time.Second

// queueBatch is the shipped sending_queue::batch::flush_timeout: how long
// a datum may wait in the cloudwatch exporter's batch before it is sent.
const queueBatch = 10 * time.Second

// TestCloudWatchRefusalShowsAsDatum: a CloudWatch-only sidecar (the
// default destination) whose CloudWatch refuses a datum. The loss lands in
// CloudWatch as otelcol_exporter_cloudwatch_points_dropped within two
// intervals of the pipeline-health reader (plus the sending queue's 10 s
// batch), and the shipped alarms on it evaluate to ALARM on the landed
// datums, while the alarms on losses that did not happen stay OK.
func TestCloudWatchRefusalShowsAsDatum(t *testing.T) {
	const refused = "pipelinehealth.refused"
	cw, err := cloudwatchtest.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = cw.Close() })
	cw.SetFaults(cloudwatchtest.Faults{RejectMetricName: refused})
	var mu sync.Mutex
	var rejectedAt time.Time
	landedAt := map[string]time.Time{} // metric name -> first arrival
	cw.OnReject(func(r cloudwatchtest.Request) {
		mu.Lock()
		defer mu.Unlock()
		if rejectedAt.IsZero() && r.Datums == 0 && strings.Contains(r.Message, "not valid") {
			rejectedAt = time.Now()
		}
	})
	cw.OnAccept(func(ds []cloudwatchtest.Datum) {
		mu.Lock()
		defer mu.Unlock()
		for _, d := range ds {
			if _, ok := landedAt[d.MetricName]; !ok && d.Dimensions["reason"] == "rejected" {
				landedAt[d.MetricName] = time.Now()
			}
		}
	})

	_, ports := startHealthSidecar(t, cw, fmt.Sprintf("GPUBUILD_PIPELINE_TELEMETRY_INTERVAL=%s", healthInterval))

	// Healthy first: the queue's gauges and the successful requests land
	// (the requests' count is read after the first batch was sent, and
	// waits for the next one), and no alarm is in ALARM.
	require.True(t, binarytest.Eventually(4*healthInterval+2*queueBatch+10*time.Second, func() bool {
		return landed(cw, "otelcol_exporter_queue_capacity") && landed(cw, "otelcol_exporter_cloudwatch_requests")
	}), "the pipeline's health did not land: %v", metricNames(cw.Datums()))
	resources := loadTemplate(t, map[string]any{"ServiceName": serviceName})
	healthAlarms := []string{"PipelinePointsLostAlarm", "PipelineRefusingAlarm", "PipelineQueueFillingAlarm",
		"DestinationRefusingAlarm", "GatewayRefusingAlarm", "NVMLErrorsAlarm"}
	now := time.Now()
	for _, a := range healthAlarms {
		state, v, err := evalAlarm(resources[a]["Properties"].(map[string]any), cw.Datums(), now.Add(-time.Minute), now.Add(time.Minute))
		require.NoError(t, err, a)
		require.NotEqual(t, "ALARM", state, "%s at %v before any loss", a, v)
	}

	// One request with a datum CloudWatch refuses (and one it takes).
	postMetrics(t, ports[1], gauges(refused, "pipelinehealth.kept"))

	// The loss lands within two intervals of the refusal (the reader
	// exports at most one interval after it; the queue's batch waits up to
	// queueBatch; a second interval covers an export that was already under
	// way).
	bound := 2*healthInterval + queueBatch
	var refusedAt, droppedAt time.Time
	binarytest.Eventually(4*healthInterval+2*queueBatch+10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		refusedAt, droppedAt = rejectedAt, landedAt["otelcol_exporter_cloudwatch_points_dropped"]
		return !refusedAt.IsZero() && !droppedAt.IsZero()
	})
	require.False(t, refusedAt.IsZero(), "CloudWatch refused nothing: %+v", cw.Stats())
	require.False(t, droppedAt.IsZero(), "no points_dropped{reason=rejected} datum landed: %v", metricNames(cw.Datums()))
	require.LessOrEqual(t, droppedAt.Sub(refusedAt), bound, "the loss landed %v after the refusal", droppedAt.Sub(refusedAt))
	t.Logf("refused at %v, the loss landed %v later (bound %v)", refusedAt.Format(time.TimeOnly), droppedAt.Sub(refusedAt), bound)
	require.Equal(t, 1.0, sumOf(cw.Datums(), "otelcol_exporter_cloudwatch_points_dropped", "reason", "rejected"), "one datum lost, counted once")
	// The datum CloudWatch took from the same request landed; the refused one did not.
	require.True(t, landed(cw, "pipelinehealth.kept"))
	require.False(t, landed(cw, refused))

	// The alarms, evaluated on the minute that holds the landed loss.
	datums := cw.Datums()
	from, to := droppedAt.Add(-30*time.Second), droppedAt.Add(30*time.Second)
	for _, a := range healthAlarms {
		state, v, err := evalAlarm(resources[a]["Properties"].(map[string]any), datums, from, to)
		require.NoError(t, err, a)
		want := "OK"
		if a == "PipelinePointsLostAlarm" || a == "DestinationRefusingAlarm" {
			want = "ALARM"
		}
		if state == "INSUFFICIENT_DATA" { // TreatMissingData: notBreaching
			state = "OK"
		}
		require.Equal(t, want, state, "%s (value %v)", a, v)
		t.Logf("%s: %s (value %v)", a, state, v)
	}
	// Dimensions never name the process: by service and destination only.
	for _, d := range datums {
		if strings.HasPrefix(d.MetricName, "otelcol_") {
			require.NotContains(t, d.Dimensions, "service.instance.id", d.MetricName)
			require.Equal(t, "otelcol-gpubuild", d.Dimensions["service.name"], d.MetricName)
		}
	}
}

// At the shipped interval (one read a minute), a loss in the last minute
// before a shutdown still lands: the receiver reads once more when it
// stops, and the exporter's drain sends it. The sidecar is stopped a few
// seconds after the loss, long before the next periodic read.
func TestLossBeforeShutdownLandsAtTheShippedInterval(t *testing.T) {
	const refused = "pipelinehealth.refused.late"
	cw, err := cloudwatchtest.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = cw.Close() })
	cw.SetFaults(cloudwatchtest.Faults{RejectMetricName: refused})
	var rejections atomic.Int64
	cw.OnReject(func(r cloudwatchtest.Request) {
		if r.Datums == 0 && strings.Contains(r.Message, "not valid") {
			rejections.Add(1)
		}
	})
	c, ports := startHealthSidecar(t, cw) // GPUBUILD_PIPELINE_TELEMETRY_INTERVAL unset: 1m
	// The read at start lands first; the next periodic one is a minute on.
	require.True(t, binarytest.Eventually(30*time.Second, func() bool { return landed(cw, "otelcol_exporter_queue_capacity") }),
		"the read at start did not land: %v", metricNames(cw.Datums()))
	started := time.Now()

	postMetrics(t, ports[1], gauges(refused, "pipelinehealth.kept.late"))
	require.True(t, binarytest.Eventually(30*time.Second, func() bool { return rejections.Load() > 0 }), "CloudWatch refused nothing: %+v", cw.Stats())
	// Counted by the collector (its pull endpoint), which follows
	// CloudWatch's answer by a moment: a loss counted before the SIGTERM is
	// what the last read is for.
	counted := regexp.MustCompile(`(?m)^otelcol_exporter_cloudwatch_points_dropped(?:_total)?\{[^}]*reason="rejected"[^}]*\} 1$`)
	require.True(t, binarytest.Eventually(30*time.Second, func() bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[3]))
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return err == nil && counted.Match(b)
	}), "the collector did not count the refused datum")
	require.Zero(t, sumOf(cw.Datums(), "otelcol_exporter_cloudwatch_points_dropped", "reason", "rejected"), "the loss landed before the shutdown")

	_, err = c.Stop(60 * time.Second)
	require.NoError(t, err)
	require.Less(t, time.Since(started), time.Minute, "stopped before the next periodic read: the last read is the shutdown's")
	require.Equal(t, 1.0, sumOf(cw.Datums(), "otelcol_exporter_cloudwatch_points_dropped", "reason", "rejected"),
		"the loss landed by the sidecar's exit: %v", metricNames(cw.Datums()))
	require.Contains(t, c.Output.String(), "Shutdown complete.")
}

// startHealthSidecar starts the sidecar on its shipped configuration,
// CloudWatch only, against cw, with extra environment, and waits until it
// is healthy. ports: health, OTLP/HTTP, OTLP/gRPC, telemetry.
func startHealthSidecar(t *testing.T, cw *cloudwatchtest.Server, extra ...string) (*binarytest.Process, []int) {
	t.Helper()
	ports := binarytest.FreePorts(t, 4)
	env := append(binarytest.EnvWithout("AWS_", "GPUBUILD_", "OTEL_", "FAKE_NVML_", "LD_LIBRARY_PATH"),
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_ACCESS_KEY_ID=AKIDPIPELINEHEALTH01",
		"AWS_SECRET_ACCESS_KEY=pipelineHealthSecretNotUsed",
		"AWS_CONFIG_FILE=/dev/null",
		"AWS_SHARED_CREDENTIALS_FILE=/dev/null",
		"AWS_REGION=us-east-1",
		"GPUBUILD_CLOUDWATCH_OUTPUT=cloudwatch",
		"GPUBUILD_CLOUDWATCH_ENDPOINT="+cw.Endpoint(),
		"GPUBUILD_CLOUDWATCH_NAMESPACE="+namespace,
		"GPUBUILD_QUEUE_DIR="+filepath.Join(t.TempDir(), "queue"),
		fmt.Sprintf("GPUBUILD_HEALTH_PORT=%d", ports[0]),
		fmt.Sprintf("GPUBUILD_OTLP_HTTP_PORT=%d", ports[1]),
		fmt.Sprintf("GPUBUILD_OTLP_GRPC_PORT=%d", ports[2]),
		fmt.Sprintf("GPUBUILD_TELEMETRY_PORT=%d", ports[3]),
	)
	c := binarytest.StartBinary(t, append(env, extra...), "--config", filepath.Join(binarytest.RepoRoot(), "otelcol-config.yaml"))
	require.NoError(t, c.AwaitHealthy(fmt.Sprintf("http://127.0.0.1:%d/", ports[0]), 60*time.Second), "collector not healthy")
	return c, ports
}

// gauges is one request of the service with a gauge point of 1 for each name.
func gauges(names ...string) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", serviceName)
	for _, name := range names {
		m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
		m.SetName(name)
		dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
		dp.SetTimestamp(pcommon.NewTimestampFromTime(time.Now()))
		dp.SetDoubleValue(1)
	}
	return md
}

// postMetrics sends md to the sidecar's OTLP/HTTP port and requires a 200.
func postMetrics(t *testing.T, port int, md pmetric.Metrics) {
	t.Helper()
	body, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
	require.NoError(t, err)
	resp, err := http.Post(fmt.Sprintf("http://127.0.0.1:%d/v1/metrics", port), "application/x-protobuf", bytes.NewReader(body))
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

func landed(cw *cloudwatchtest.Server, metric string) bool {
	for _, d := range cw.Datums() {
		if d.MetricName == metric {
			return true
		}
	}
	return false
}

func metricNames(datums []cloudwatchtest.Datum) map[string]int {
	out := map[string]int{}
	for _, d := range datums {
		out[d.MetricName]++
	}
	return out
}

func sumOf(datums []cloudwatchtest.Datum, metric, dim, value string) float64 {
	var s float64
	for _, d := range datums {
		if d.MetricName == metric && d.Dimensions[dim] == value && d.Value != nil {
			s += *d.Value
		}
	}
	return s
}
