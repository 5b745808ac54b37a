// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/metadatatest"
	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/translate"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
)

// isolateAWS gives the SDK static credentials and nothing else to find.
func isolateAWS(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

type testExporter struct {
	*metricsExporter
	server    *cloudwatchtest.Server
	telemetry *componenttest.Telemetry
	stopOnce  sync.Once
	stopErr   error
}

// stop shuts the exporter down (once): it flushes the queue.
func (te *testExporter) stop() error {
	te.stopOnce.Do(func() { te.stopErr = te.Shutdown(context.Background()) })
	return te.stopErr
}

// newTestExporter starts a cloudwatchtest server and an exporter sending to
// it through the real SDK client. queue: whether the sending queue is on.
func newTestExporter(t *testing.T, queue bool, tweak func(*Config)) *testExporter {
	t.Helper()
	isolateAWS(t)
	server, err := cloudwatchtest.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = server.Close() })

	cfg := testConfig()
	cfg.Region = "eu-west-1"
	cfg.Endpoint = server.Endpoint()
	cfg.BackOffConfig.InitialInterval = 5 * time.Millisecond
	cfg.BackOffConfig.MaxInterval = 20 * time.Millisecond
	cfg.BackOffConfig.MaxElapsedTime = 30 * time.Second
	cfg.BackOffConfig.RandomizationFactor = 0
	if !queue {
		cfg.QueueConfig = configoptional.None[exporterhelper.QueueBatchConfig]()
	}
	if tweak != nil {
		tweak(cfg)
	}
	require.NoError(t, cfg.Validate())

	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tt.Shutdown(context.Background()) })
	exp, err := NewFactory().CreateMetrics(context.Background(), metadatatest.NewSettings(tt), cfg)
	require.NoError(t, err)
	me := exp.(*metricsExporter)
	me.throttleDelay = 5 * time.Millisecond
	require.NoError(t, me.Start(context.Background(), componenttest.NewNopHost()))
	te := &testExporter{metricsExporter: me, server: server, telemetry: tt}
	t.Cleanup(func() { _ = te.stop() })
	return te
}

// counter sums a telemetry counter per value of one attribute ("" for none).
func (te *testExporter) counter(t *testing.T, name, attr string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	m, err := te.telemetry.GetMetric("otelcol_exporter_cloudwatch_" + name)
	if err != nil {
		return out
	}
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		v, _ := dp.Attributes.Value(attribute.Key(attr))
		out[v.AsString()] += dp.Value
	}
	return out
}

// seriesKey identifies a CloudWatch series and timestamp in the server's datums.
func seriesKey(d cloudwatchtest.Datum) string {
	keys := make([]string, 0, len(d.Dimensions))
	for k, v := range d.Dimensions {
		keys = append(keys, k+"="+v)
	}
	sort.Strings(keys)
	return d.MetricName + "{" + strings.Join(keys, ",") + "}"
}

// statistics computes, as CloudWatch does, SampleCount, Sum, Minimum and
// Maximum of the accepted datums of one metric name.
func statistics(datums []cloudwatchtest.Datum, name string) (st translate.StatisticSet, n int) {
	first := true
	add := func(v, c float64) {
		if first {
			st.Min, st.Max, first = v, v, false
		}
		st.SampleCount += c
		st.Sum += v * c
		st.Min, st.Max = math.Min(st.Min, v), math.Max(st.Max, v)
	}
	for _, d := range datums {
		if d.MetricName != name {
			continue
		}
		n++
		switch {
		case d.Value != nil:
			add(*d.Value, 1)
		case d.Statistics != nil:
			add(d.Statistics.Minimum, 0)
			add(d.Statistics.Maximum, 0)
			st.SampleCount += d.Statistics.SampleCount
			st.Sum += d.Statistics.Sum
		default:
			for i, v := range d.Values {
				add(v, d.Counts[i])
			}
		}
	}
	return st, n
}

func newest() pcommon.Timestamp { return pcommon.NewTimestampFromTime(time.Now()) }

// everyType builds one batch with every data type; step moves the
// cumulative ones forward (the values of step 1 are step 0's plus what was
// observed in between).
func everyType(start pcommon.Timestamp, step int) pmetric.Metrics {
	now := pcommon.NewTimestampFromTime(start.AsTime().Add(time.Duration(step+1) * time.Minute))
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "indexer")
	rm.Resource().Attributes().PutStr("service.instance.id", "pod-7")
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()

	g := ms.AppendEmpty()
	g.SetName("gpu.utilization")
	g.SetUnit("%")
	gp := g.SetEmptyGauge().DataPoints().AppendEmpty()
	gp.SetTimestamp(now)
	gp.SetDoubleValue(float64(40 + step))
	gp.Attributes().PutStr("gpu.uuid", "GPU-0")

	d := ms.AppendEmpty()
	d.SetName("jobs.started")
	d.SetUnit("{job}")
	ds := d.SetEmptySum()
	ds.SetIsMonotonic(true)
	ds.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	dp := ds.DataPoints().AppendEmpty()
	dp.SetTimestamp(now)
	dp.SetIntValue(int64(2 + step))

	c := ms.AppendEmpty()
	c.SetName("bytes.uploaded")
	c.SetUnit("By")
	cs := c.SetEmptySum()
	cs.SetIsMonotonic(true)
	cs.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	cp := cs.DataPoints().AppendEmpty()
	cp.SetStartTimestamp(start)
	cp.SetTimestamp(now)
	cp.SetIntValue([]int64{1000, 1500, 4000}[step])

	u := ms.AppendEmpty()
	u.SetName("jobs.running")
	u.SetUnit("{job}")
	us := u.SetEmptySum()
	us.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	up := us.DataPoints().AppendEmpty()
	up.SetTimestamp(now)
	up.SetIntValue(int64(3 - step))

	h := ms.AppendEmpty()
	h.SetName("stage.duration")
	h.SetUnit("s")
	hh := h.SetEmptyHistogram()
	hh.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	hp := hh.DataPoints().AppendEmpty()
	hp.SetStartTimestamp(start)
	hp.SetTimestamp(now)
	// step 0: 0.5, 2, 3 (sum 5.5); step 1 adds 30 and 0.2 (sum 35.7); step 2 adds 4.
	switch step {
	case 0:
		fillHistogram(hp, []float64{1, 10}, []uint64{1, 2, 0}, 5.5)
		hp.SetMin(0.5)
		hp.SetMax(3)
	case 1:
		fillHistogram(hp, []float64{1, 10}, []uint64{2, 2, 1}, 35.7)
		hp.SetMin(0.2)
		hp.SetMax(30)
	case 2:
		fillHistogram(hp, []float64{1, 10}, []uint64{2, 3, 1}, 39.7)
		hp.SetMin(0.2)
		hp.SetMax(30)
	}

	e := ms.AppendEmpty()
	e.SetName("vector.bytes")
	e.SetUnit("By")
	eh := e.SetEmptyExponentialHistogram()
	eh.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	ep := eh.DataPoints().AppendEmpty()
	ep.SetTimestamp(now)
	ep.SetScale(0)
	ep.SetCount(2)
	ep.SetSum(float64(3 + 5)) // 3 in (2,4], 5 in (4,8]
	ep.SetMin(3)
	ep.SetMax(5)
	ep.Positive().SetOffset(1)
	ep.Positive().BucketCounts().FromRaw([]uint64{1, 1})

	// A delta histogram without min/max: 2 observations, sum 6, per export.
	dh := ms.AppendEmpty()
	dh.SetName("queue.wait")
	dh.SetUnit("s")
	dhh := dh.SetEmptyHistogram()
	dhh.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	dhp := dhh.DataPoints().AppendEmpty()
	dhp.SetTimestamp(now)
	fillHistogram(dhp, []float64{1, 10}, []uint64{1, 1, 0}, 6)

	// A cumulative exponential histogram (scale 0: index 0 is (1,2], 1 is
	// (2,4]): 1.5 first, then 3 and 3.5, then 1.2.
	ce := ms.AppendEmpty()
	ce.SetName("vector.dims")
	ce.SetUnit("{dim}")
	ceh := ce.SetEmptyExponentialHistogram()
	ceh.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	cep := ceh.DataPoints().AppendEmpty()
	cep.SetStartTimestamp(start)
	cep.SetTimestamp(now)
	cep.SetScale(0)
	cep.Positive().BucketCounts().FromRaw([][]uint64{{1, 0}, {1, 2}, {2, 2}}[step])
	cep.SetCount([]uint64{1, 3, 4}[step])
	cep.SetSum([]float64{1.5, 8, 9.2}[step])

	// A delta up-down counter: +2, -1, +3.
	ud := ms.AppendEmpty()
	ud.SetName("queue.change")
	uds := ud.SetEmptySum()
	uds.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	udp := uds.DataPoints().AppendEmpty()
	udp.SetTimestamp(now)
	udp.SetIntValue([]int64{2, -1, 3}[step])

	s := ms.AppendEmpty()
	s.SetName("rpc.latency")
	s.SetUnit("ms")
	sp := s.SetEmptySummary().DataPoints().AppendEmpty()
	sp.SetStartTimestamp(start)
	sp.SetTimestamp(now)
	sp.SetCount([]uint64{10, 14, 20}[step])
	sp.SetSum([]float64{100, 180, 240}[step])
	return md
}

func TestExportEveryTypeThroughTheSDK(t *testing.T) {
	te := newTestExporter(t, false, nil)
	start := pcommon.NewTimestampFromTime(time.Now().Add(-10 * time.Minute))
	for step := 0; step < 3; step++ {
		require.NoError(t, te.ConsumeMetrics(context.Background(), everyType(start, step)))
	}
	got := te.server.Datums()

	// Gauges and up-down counters: their values.
	st, n := statistics(got, "gpu.utilization")
	assert.Equal(t, 3, n)
	assert.Equal(t, translate.StatisticSet{SampleCount: 3, Sum: 40 + 41 + 42, Min: 40, Max: 42}, st)
	st, _ = statistics(got, "jobs.running")
	assert.Equal(t, translate.StatisticSet{SampleCount: 3, Sum: 3 + 2 + 1, Min: 1, Max: 3}, st)
	// Delta sums: their values.
	st, _ = statistics(got, "jobs.started")
	assert.Equal(t, 2.0+3+4, st.Sum)
	// Cumulative sums: the first point is kept (start time known), so the
	// deltas add up to the last cumulative value.
	st, n = statistics(got, "bytes.uploaded")
	assert.Equal(t, 3, n)
	assert.Equal(t, translate.StatisticSet{SampleCount: 3, Sum: 4000, Min: 500, Max: 2500}, st)
	// Cumulative histogram: every observation exactly once, exact statistics.
	st, _ = statistics(got, "stage.duration")
	assert.Equal(t, 6.0, st.SampleCount)
	assert.InDelta(t, 39.7, st.Sum, 1e-9)
	assert.Equal(t, 0.2, st.Min)
	assert.Equal(t, 30.0, st.Max)
	// Exponential histogram (delta), three times.
	st, _ = statistics(got, "vector.bytes")
	assert.Equal(t, translate.StatisticSet{SampleCount: 6, Sum: 24, Min: 3, Max: 5}, st)
	// Delta histogram: (-inf,1] takes 0.5 so that 0.5 + 5.5 = 6.
	st, _ = statistics(got, "queue.wait")
	assert.Equal(t, translate.StatisticSet{SampleCount: 6, Sum: 18, Min: 0.5, Max: 5.5}, st)
	// Cumulative exponential histogram: 1.5, then two values in (2,4] that
	// sum to 6.5 (3.25 each), then 1.2.
	st, _ = statistics(got, "vector.dims")
	assert.Equal(t, 4.0, st.SampleCount)
	assert.InDelta(t, 9.2, st.Sum, 1e-9)
	assert.InDelta(t, 1.2, st.Min, 1e-12)
	assert.InDelta(t, 3.25, st.Max, 1e-12)
	// Delta up-down counter: its values.
	st, _ = statistics(got, "queue.change")
	assert.Equal(t, translate.StatisticSet{SampleCount: 3, Sum: 4, Min: -1, Max: 3}, st)
	// Summary: delta count and sum as a StatisticSet.
	st, n = statistics(got, "rpc.latency")
	assert.Equal(t, 3, n)
	assert.Equal(t, 20.0, st.SampleCount)
	assert.Equal(t, 240.0, st.Sum)

	for _, d := range got {
		assert.Equal(t, "Test", d.Namespace)
		assert.Equal(t, "indexer", d.Dimensions["service.name"], d.MetricName)
		assert.NotContains(t, d.Dimensions, "service.instance.id")
	}
	units := map[string]string{}
	for _, d := range got {
		units[d.MetricName] = d.Unit
	}
	assert.Equal(t, map[string]string{
		"gpu.utilization": "Percent", "jobs.started": "Count", "bytes.uploaded": "Bytes", "jobs.running": "Count",
		"stage.duration": "Seconds", "vector.bytes": "Bytes", "rpc.latency": "Milliseconds",
		"queue.wait": "Seconds", "vector.dims": "Count", "queue.change": "None",
	}, units)
	assert.Equal(t, int64(len(got)), te.counter(t, "datums_sent", "")[""])
	assert.Equal(t, map[string]int64{"success": int64(te.server.Stats().Requests)}, te.counter(t, "requests", "outcome"))
}

// gauges builds n gauge points of one metric, each its own series.
func gauges(n int, dims int, valueLen int) pmetric.Metrics {
	md := pmetric.NewMetrics()
	dps := newMetric(md, "load", "1").SetEmptyGauge().DataPoints()
	now := newest()
	for i := 0; i < n; i++ {
		dp := dps.AppendEmpty()
		dp.SetTimestamp(now)
		dp.SetDoubleValue(float64(i))
		dp.Attributes().PutInt("i", int64(i))
		for j := 0; j < dims; j++ {
			dp.Attributes().PutStr(fmt.Sprintf("dim%02d", j), strings.Repeat(string(rune('a'+j%26)), valueLen))
		}
	}
	return md
}

func TestSplitAt1000Datums(t *testing.T) {
	te := newTestExporter(t, false, nil)
	require.NoError(t, te.ConsumeMetrics(context.Background(), gauges(2500, 0, 0)))
	var sizes []int
	for _, r := range te.server.Requests() {
		assert.Empty(t, r.ErrorCode)
		sizes = append(sizes, r.Datums)
	}
	sort.Ints(sizes)
	assert.Equal(t, []int{500, 1000, 1000}, sizes, "ceil(2500/1000) requests")
	assert.Len(t, te.server.Datums(), 2500)
}

func TestSplitAt1MB(t *testing.T) {
	te := newTestExporter(t, false, nil)
	// 29 dimensions of 1000 characters plus "i" and service.name: about 30 kB a datum.
	const n = 200
	require.NoError(t, te.ConsumeMetrics(context.Background(), gauges(n, 28, 1000)))
	reqs := te.server.Requests()
	total, perRequest := 0, 0
	for _, r := range reqs {
		assert.Empty(t, r.ErrorCode)
		assert.LessOrEqual(t, r.BodyBytes, cloudwatchtest.MaxRequestBytes)
		total += r.Datums
		perRequest = max(perRequest, r.Datums)
	}
	assert.Equal(t, n, total)
	assert.Len(t, te.server.Datums(), n)
	// The datums are the same size (to within the digits of "i"), so the
	// fewest requests is n over how many fit in one.
	assert.Len(t, reqs, (n+perRequest-1)/perRequest)
	assert.Greater(t, len(reqs), 1)
}

func TestDropReasonsAreCounted(t *testing.T) {
	te := newTestExporter(t, false, func(cfg *Config) {
		cfg.Metrics = []MetricRule{{Match: "debug.*", Drop: true}}
	})
	md := pmetric.NewMetrics()
	dps := newMetric(md, "g", "").SetEmptyGauge().DataPoints()
	now := time.Now()
	for _, p := range []struct {
		v  float64
		at time.Time
	}{
		{1, now}, {math.NaN(), now}, {math.Inf(-1), now}, {1e300, now},
		{2, now.Add(-20 * 24 * time.Hour)}, {3, now.Add(5 * time.Hour)}, {4, now},
	} {
		dp := dps.AppendEmpty()
		dp.SetDoubleValue(p.v)
		dp.SetTimestamp(pcommon.NewTimestampFromTime(p.at))
	}
	newMetric(md, "debug.x", "").SetEmptyGauge().DataPoints().AppendEmpty().SetTimestamp(newest())
	baseline := cumulativeSum(0, newest(), 10, nil) // no start time: a baseline
	baseline.ResourceMetrics().MoveAndAppendTo(md.ResourceMetrics())

	require.NoError(t, te.ConsumeMetrics(context.Background(), md))
	var values []float64
	for _, d := range te.server.Datums() {
		values = append(values, *d.Value)
	}
	assert.Equal(t, []float64{1, 4}, values, "the good points of the batch are sent")
	assert.Equal(t, map[string]int64{
		"nan_or_inf": 2, "out_of_range": 1, "too_old": 1, "too_new": 1, "rule": 1, "cumulative_baseline": 1,
	}, te.counter(t, "points_dropped", "reason"))
}

// deltaBatch is one delta sum point per series for series 0..n-1, value v.
func deltaBatch(n int, ts pcommon.Timestamp, v int64) pmetric.Metrics {
	md := pmetric.NewMetrics()
	sum := newMetric(md, "work", "{item}").SetEmptySum()
	sum.SetIsMonotonic(true)
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	for i := 0; i < n; i++ {
		dp := sum.DataPoints().AppendEmpty()
		dp.SetTimestamp(ts)
		dp.SetIntValue(v)
		dp.Attributes().PutInt("series", int64(i))
	}
	return md
}

// assertExactlyOnce checks that every (series, timestamp) arrived exactly
// once and that the values add up to want. Datums folded into a metric's
// overflow series share its key and timestamp by design (CloudWatch
// aggregates them); a resent fold is still caught by the count and the sum.
func assertExactlyOnce(t *testing.T, datums []cloudwatchtest.Datum, wantDatums int, wantSum float64) {
	t.Helper()
	seen := map[string]int{}
	sum := 0.0
	for _, d := range datums {
		sum += *d.Value
		if d.Dimensions[translate.OverflowDimension] == "true" {
			continue
		}
		seen[seriesKey(d)+"@"+d.Timestamp.String()]++
	}
	dups := 0
	for _, c := range seen {
		dups += c - 1
	}
	assert.Zero(t, dups, "datums accepted twice")
	assert.Len(t, datums, wantDatums)
	assert.Equal(t, wantSum, sum)
}
