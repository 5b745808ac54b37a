// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package dashboards

import (
	"bytes"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
)

// TestAdmissionRefusalShowsAsDatum: a sidecar whose admission limit is
// below any Go heap refuses an OTLP request for memory, before the
// receiver; the refusal lands in CloudWatch as a pipeline-health datum
// with the dimensions the alarm reads, and PipelineRefusingAlarm evaluates
// to ALARM on it.
func TestAdmissionRefusalShowsAsDatum(t *testing.T) {
	const metric = "otelcol_admission_refused_requests"
	cw, err := cloudwatchtest.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = cw.Close() })
	_, ports := startHealthSidecar(t, cw,
		fmt.Sprintf("GPUBUILD_PIPELINE_TELEMETRY_INTERVAL=%s", healthInterval),
		"GPUBUILD_MEMORY_LIMIT_MIB=2", "GPUBUILD_MEMORY_SPIKE_LIMIT_MIB=1")
	require.True(t, binarytest.Eventually(4*healthInterval+10*time.Second, func() bool {
		return landed(cw, "otelcol_exporter_queue_capacity")
	}), "the pipeline's health did not land: %v", metricNames(cw.Datums()))
	require.False(t, landed(cw, metric), "a refusal before any request")

	body, err := pmetricotlp.NewExportRequestFromMetrics(gauges("admission.refused")).MarshalProto()
	require.NoError(t, err)
	resp, err := http.Post(fmt.Sprintf("http://127.0.0.1:%d/v1/metrics", ports[1]), "application/x-protobuf", bytes.NewReader(body))
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "the heap check did not refuse")

	var refusal cloudwatchtest.Datum
	require.True(t, binarytest.Eventually(2*healthInterval+10*time.Second, func() bool {
		for _, d := range cw.Datums() {
			if d.MetricName == metric {
				refusal = d
				return true
			}
		}
		return false
	}), "no %s datum landed: %v", metric, metricNames(cw.Datums()))
	require.Equal(t, "memory", refusal.Dimensions["reason"], "%v", refusal.Dimensions)
	require.ElementsMatch(t, []string{"reason", "service.name"}, slices.Collect(maps.Keys(refusal.Dimensions)))
	require.False(t, landed(cw, "admission.refused"), "the refused request's data landed")

	resources := loadTemplate(t, map[string]any{"ServiceName": serviceName})
	state, v, err := evalAlarm(resources["PipelineRefusingAlarm"]["Properties"].(map[string]any), cw.Datums(),
		refusal.Timestamp.Add(-30*time.Second), refusal.Timestamp.Add(30*time.Second))
	require.NoError(t, err)
	require.Equal(t, "ALARM", state, "PipelineRefusingAlarm (value %v)", v)
}

// Busy refusals (every max_in_flight place taken) are charted, not
// alarmed; memory ones alarm. Evaluated on datums as the sidecar sends
// them (TestAdmissionRefusalShowsAsDatum checks the dimensions).
func TestPipelineRefusingAlarmIgnoresBusyRefusals(t *testing.T) {
	resources := loadTemplate(t, map[string]any{"ServiceName": serviceName})
	props := resources["PipelineRefusingAlarm"]["Properties"].(map[string]any)
	now := time.Now()
	datum := func(reason string) cloudwatchtest.Datum {
		v := 5.0
		return cloudwatchtest.Datum{Namespace: namespace, MetricName: "otelcol_admission_refused_requests", Timestamp: now,
			Dimensions: map[string]string{"reason": reason, "service.name": "otelcol-gpubuild"}, Value: &v}
	}
	for reason, want := range map[string]string{"busy": "OK", "memory": "ALARM"} {
		state, v, err := evalAlarm(props, []cloudwatchtest.Datum{datum(reason)}, now.Add(-time.Minute), now.Add(time.Minute))
		require.NoError(t, err)
		if state == "INSUFFICIENT_DATA" { // TreatMissingData: notBreaching
			state = "OK"
		}
		require.Equal(t, want, state, "%s refusals (value %v)", reason, v)
	}
}
