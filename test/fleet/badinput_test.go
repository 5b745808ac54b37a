// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/promtext"
)

// jobsDelta is one worker's delta build.jobs point of the given unit, as an
// int sum or, with asGauge, as a gauge.
func jobsDelta(worker string, unit string, v int64, asGauge bool) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "vector-index-build")
	rm.Resource().Attributes().PutStr("service.instance.id", worker)
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("build.jobs")
	m.SetUnit(unit)
	var dp pmetric.NumberDataPoint
	if asGauge {
		dp = m.SetEmptyGauge().DataPoints().AppendEmpty()
	} else {
		s := m.SetEmptySum()
		s.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
		s.SetIsMonotonic(true)
		dp = s.DataPoints().AppendEmpty()
	}
	dp.Attributes().PutStr("build.result", "success")
	dp.SetTimestamp(pcommonTime(time.Now()))
	dp.SetIntValue(v)
	return md
}

// TestConflictingSeriesDoesNotPoisonTheOthers: five workers send build.jobs
// as a delta counter of unit {job}; one sends the same name in
// milliseconds, another as a gauge. The five land as one datum summing to
// exactly their total, the odd ones as their own datums; the unit conflict
// is counted in the gateway's telemetry and logged.
func TestConflictingSeriesDoesNotPoisonTheOthers(t *testing.T) {
	cw, err := cloudwatchtest.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = cw.Close() })
	gw := newNode(t, "otelcol-gateway.yaml", gatewayEnv(cw, 2*time.Second)...)
	gw.start()

	conn, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", gw.grpc), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	client := pmetricotlp.NewGRPCClient(conn)

	sends := []pmetric.Metrics{
		jobsDelta("w1", "{job}", 1, false), jobsDelta("w2", "{job}", 2, false),
		jobsDelta("bad-unit", "ms", 1000, false),
		jobsDelta("w3", "{job}", 3, false), jobsDelta("bad-type", "{job}", 500, true),
		jobsDelta("w4", "{job}", 4, false), jobsDelta("w5", "{job}", 5, false),
	}
	// One request (as a first tier forwarding several workers would send),
	// so that every point is in the same interval.
	all := pmetric.NewMetrics()
	for _, md := range sends {
		md.ResourceMetrics().MoveAndAppendTo(all.ResourceMetrics())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = client.Export(ctx, pmetricotlp.NewExportRequestFromMetrics(all))
	require.NoError(t, err, "acknowledged, the odd series too")

	require.True(t, binarytest.Eventually(30*time.Second, func() bool { return len(cw.WorkloadDatums()) >= 3 }), "datums landed: %v", cw.WorkloadDatums())
	byUnit := map[string][]float64{}
	for _, d := range cw.WorkloadDatums() {
		require.Equal(t, "build.jobs", d.MetricName)
		require.NotNil(t, d.Value)
		byUnit[d.Unit] = append(byUnit[d.Unit], *d.Value)
	}
	// The gauge has the same name and unit: it lands beside the merged
	// counter as its own datum (kept per worker), never added to it.
	assert.ElementsMatch(t, []float64{15, 500}, byUnit["Count"], "the five counters merged into one datum; the gauge kept apart")
	assert.Equal(t, []float64{1000}, byUnit["Milliseconds"], "the conflicting unit kept apart")
	assert.Len(t, byUnit, 2)

	f, err := promtext.Scrape(fmt.Sprintf("127.0.0.1:%d", gw.telemetry))
	require.NoError(t, err)
	conflicts, ok := f.Sum("otelcol_intervalmerge_conflicts", nil)
	require.True(t, ok, "conflicts counter exported: %v", f.Names())
	assert.Equal(t, 1.0, conflicts)
	assert.Contains(t, gw.Output.String(), "series kept apart")
	assert.Contains(t, gw.Output.String(), "build.jobs")
}
