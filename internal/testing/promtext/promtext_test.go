// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package promtext

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const exposition = `# HELP otelcol_receiver_refused_spans_total Spans refused.
# TYPE otelcol_receiver_refused_spans_total counter
otelcol_receiver_refused_spans_total{receiver="otlp",transport="grpc"} 3
otelcol_receiver_refused_spans_total{receiver="otlp",transport="http"} 4
# HELP otelcol_exporter_queue_size Queue size.
# TYPE otelcol_exporter_queue_size gauge
otelcol_exporter_queue_size{exporter="cloudwatch",data_type="metrics"} 2
otelcol_exporter_queue_size{exporter="debug",data_type="metrics"} 9
# HELP otelcol_buildjob_records_skipped_total Records skipped.
# TYPE otelcol_buildjob_records_skipped_total counter
otelcol_buildjob_records_skipped_total{reason="no job id, \"quoted\", with comma"} 1.5
# TYPE otelcol_exporter_send_latency histogram
otelcol_exporter_send_latency_bucket{le="+Inf"} 7
otelcol_exporter_send_latency_sum 0.5
otelcol_exporter_send_latency_count 7
`

func TestSum(t *testing.T) {
	f, err := Parse(strings.NewReader(exposition))
	require.NoError(t, err)

	v, ok := f.Sum("otelcol_receiver_refused_spans", nil)
	assert.True(t, ok)
	assert.Equal(t, 7.0, v, "both transports, found through the _total suffix")

	v, ok = f.Sum("otelcol_exporter_queue_size", map[string]string{"exporter": "cloudwatch"})
	assert.True(t, ok)
	assert.Equal(t, 2.0, v, "only the series with the wanted label")

	v, ok = f.Sum("otelcol_buildjob_records_skipped", map[string]string{"reason": `no job id, "quoted", with comma`})
	assert.True(t, ok)
	assert.Equal(t, 1.5, v, "escaped quotes and commas inside a label value")

	_, ok = f.Sum("otelcol_exporter_queue_size", map[string]string{"exporter": "s3"})
	assert.False(t, ok, "no series has the label value")
	_, ok = f.Sum("missing", nil)
	assert.False(t, ok)
	_, ok = f.Sum("otelcol_exporter_send_latency", nil)
	assert.False(t, ok, "a histogram has no single value to add")

	assert.Contains(t, f.Names(), "otelcol_exporter_queue_size")
}

func TestParseRejectsBadText(t *testing.T) {
	_, err := Parse(strings.NewReader("metric{a=\"b\" 1\n"))
	assert.Error(t, err)
}
