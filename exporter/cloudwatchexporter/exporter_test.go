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
	me.exp.throttleDelay = 5 * time.Millisecond
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
func statistics(datums []cloudwatchtest.Datum, name string) (st statisticSet, n int) {
	first := true
	add := func(v, c float64) {
		if first {
			st.min, st.max, first = v, v, false
		}
		st.sampleCount += c
		st.sum += v * c
		st.min, st.max = math.Min(st.min, v), math.Max(st.max, v)
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
			st.sampleCount += d.Statistics.SampleCount
			st.sum += d.Statistics.Sum
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
	assert.Equal(t, statisticSet{sampleCount: 3, sum: 40 + 41 + 42, min: 40, max: 42}, st)
	st, _ = statistics(got, "jobs.running")
	assert.Equal(t, statisticSet{sampleCount: 3, sum: 3 + 2 + 1, min: 1, max: 3}, st)
	// Delta sums: their values.
	st, _ = statistics(got, "jobs.started")
	assert.Equal(t, 2.0+3+4, st.sum)
	// Cumulative sums: the first point is kept (start time known), so the
	// deltas add up to the last cumulative value.
	st, n = statistics(got, "bytes.uploaded")
	assert.Equal(t, 3, n)
	assert.Equal(t, statisticSet{sampleCount: 3, sum: 4000, min: 500, max: 2500}, st)
	// Cumulative histogram: every observation exactly once, exact statistics.
	st, _ = statistics(got, "stage.duration")
	assert.Equal(t, 6.0, st.sampleCount)
	assert.InDelta(t, 39.7, st.sum, 1e-9)
	assert.Equal(t, 0.2, st.min)
	assert.Equal(t, 30.0, st.max)
	// Exponential histogram (delta), three times.
	st, _ = statistics(got, "vector.bytes")
	assert.Equal(t, statisticSet{sampleCount: 6, sum: 24, min: 3, max: 5}, st)
	// Delta histogram: (-inf,1] takes 0.5 so that 0.5 + 5.5 = 6.
	st, _ = statistics(got, "queue.wait")
	assert.Equal(t, statisticSet{sampleCount: 6, sum: 18, min: 0.5, max: 5.5}, st)
	// Cumulative exponential histogram: 1.5, then two values in (2,4] that
	// sum to 6.5 (3.25 each), then 1.2.
	st, _ = statistics(got, "vector.dims")
	assert.Equal(t, 4.0, st.sampleCount)
	assert.InDelta(t, 9.2, st.sum, 1e-9)
	assert.InDelta(t, 1.2, st.min, 1e-12)
	assert.InDelta(t, 3.25, st.max, 1e-12)
	// Delta up-down counter: its values.
	st, _ = statistics(got, "queue.change")
	assert.Equal(t, statisticSet{sampleCount: 3, sum: 4, min: -1, max: 3}, st)
	// Summary: delta count and sum as a StatisticSet.
	st, n = statistics(got, "rpc.latency")
	assert.Equal(t, 3, n)
	assert.Equal(t, 20.0, st.sampleCount)
	assert.Equal(t, 240.0, st.sum)

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
		if d.Dimensions[overflowDimension] == "true" {
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

func TestRetryResendsOnlyWhatFailed(t *testing.T) {
	te := newTestExporter(t, false, func(cfg *Config) { cfg.MaxConcurrentRequests = 1 })
	// Three requests per flush; the second is throttled.
	te.server.SetFaults(cloudwatchtest.Faults{ThrottleEvery: 2})
	require.NoError(t, te.ConsumeMetrics(context.Background(), deltaBatch(2500, newest(), 1)))
	assertExactlyOnce(t, te.server.Datums(), 2500, 2500)
	// Requests: 1 ok, 2 throttled, 3 ok; the retry re-sends only request 2's
	// 1000 datums: request 4, throttled again, then request 5, ok. Nothing
	// accepted was sent again.
	assert.Equal(t, cloudwatchtest.Stats{Requests: 5, Accepted: 3, Throttled: 2}, te.server.Stats())
	assert.Equal(t, map[string]int64{"success": 3, "throttled": 2}, te.counter(t, "requests", "outcome"))
	assert.Equal(t, int64(2000), te.counter(t, "points_retried", "")[""])
}

func TestRecoveryIsExactUnderFaults(t *testing.T) {
	for name, faults := range map[string]cloudwatchtest.Faults{
		"throttling":          {ThrottleEvery: 3},
		"5xx":                 {ServerErrorEvery: 2},
		"dropped connections": {DropEvery: 4},
		"everything":          {ThrottleEvery: 5, ServerErrorEvery: 3, DropEvery: 7},
	} {
		t.Run(name, func(t *testing.T) {
			te := newTestExporter(t, true, func(cfg *Config) {
				cfg.MaxConcurrentRequests = 3
				cfg.QueueConfig.Get().NumConsumers = 2
			})
			te.server.SetFaults(faults)
			// Cumulative counters for 1200 series over 4 exports: the deltas
			// must add up to the last values, whatever was retried.
			start := pcommon.NewTimestampFromTime(time.Now().Add(-time.Hour))
			const series = 1200
			var want float64
			for step := 1; step <= 4; step++ {
				md := pmetric.NewMetrics()
				sum := newMetric(md, "bytes", "By").SetEmptySum()
				sum.SetIsMonotonic(true)
				sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
				ts := pcommon.NewTimestampFromTime(start.AsTime().Add(time.Duration(step) * time.Minute))
				for i := 0; i < series; i++ {
					dp := sum.DataPoints().AppendEmpty()
					dp.SetStartTimestamp(start)
					dp.SetTimestamp(ts)
					dp.SetIntValue(int64(step * (i + 1)))
					dp.Attributes().PutInt("series", int64(i))
				}
				require.NoError(t, te.ConsumeMetrics(context.Background(), md))
			}
			for i := 0; i < series; i++ {
				want += float64(4 * (i + 1))
			}
			require.Eventually(t, func() bool { return len(te.server.Datums()) >= 4*series }, 20*time.Second, 10*time.Millisecond)
			require.NoError(t, te.stop())
			assertExactlyOnce(t, te.server.Datums(), 4*series, want)
			st := te.server.Stats()
			assert.Positive(t, st.Throttled+st.ServerErrors+st.Dropped, "faults were injected")
		})
	}
}

func TestOutageRecovery(t *testing.T) {
	te := newTestExporter(t, true, nil)
	require.NoError(t, te.server.SetDown(true))
	require.NoError(t, te.ConsumeMetrics(context.Background(), deltaBatch(1500, newest(), 2)))
	assert.Eventually(t, func() bool { return te.counter(t, "requests", "outcome")["network_error"] > 0 }, 5*time.Second, 5*time.Millisecond)
	require.NoError(t, te.server.SetDown(false))
	require.Eventually(t, func() bool { return len(te.server.Datums()) >= 1500 }, 20*time.Second, 10*time.Millisecond)
	require.NoError(t, te.stop())
	assertExactlyOnce(t, te.server.Datums(), 1500, 3000)
}

// A request refused for what all its points share is sent again once, in
// two halves (in case one point alone was refused, see
// TestOnePointRefusedCostsOnlyItself); both refused, the points are
// dropped: three requests, and the export is not retried.
func TestRejectedRequestIsNotRetried(t *testing.T) {
	te := newTestExporter(t, false, nil)
	// To the server our points are 3 h in the future: it rejects the request.
	te.server.SetClock(func() time.Time { return time.Now().Add(-3 * time.Hour) })
	err := te.ConsumeMetrics(context.Background(), deltaBatch(10, newest(), 1))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "InvalidParameterValue")
	assert.Equal(t, cloudwatchtest.Stats{Requests: 3, Rejected: 3}, te.server.Stats(), "no retry")
	assert.Equal(t, map[string]int64{"rejected": 10}, te.counter(t, "points_dropped", "reason"))
	assert.Equal(t, map[string]int64{"rejected": 2, "rejected_split": 1}, te.counter(t, "requests", "outcome"))
}

// One data point CloudWatch refuses (a value the translation did not
// foresee) costs only itself: its request is halved, and the refused half
// again, until the point is alone; every other point lands once.
func TestOnePointRefusedCostsOnlyItself(t *testing.T) {
	te := newTestExporter(t, false, nil)
	md := gauges(600, 0, 0)
	bad := gauges(1, 0, 0)
	bad.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).SetName("refused")
	bad.ResourceMetrics().MoveAndAppendTo(md.ResourceMetrics())
	te.server.SetFaults(cloudwatchtest.Faults{RejectMetricName: "refused"})

	err := te.ConsumeMetrics(context.Background(), md)
	require.Error(t, err, "the refused point is reported (permanent)")
	assert.Contains(t, err.Error(), "InvalidParameterValue")
	assert.Len(t, te.server.Datums(), 600, "every other point landed")
	for _, d := range te.server.Datums() {
		assert.NotEqual(t, "refused", d.MetricName)
	}
	assert.Equal(t, map[string]int64{"rejected": 1}, te.counter(t, "points_dropped", "reason"))
	outcomes := te.counter(t, "requests", "outcome")
	assert.Equal(t, int64(1), outcomes["rejected"])
	assert.LessOrEqual(t, te.server.Stats().Requests, 1+2*11, "about two requests per halving, log2(601) halvings")
	assert.Positive(t, outcomes["rejected_split"])
}

func TestShutdownFlushesTheQueue(t *testing.T) {
	te := newTestExporter(t, true, nil)
	te.server.SetFaults(cloudwatchtest.Faults{Latency: 50 * time.Millisecond})
	for i := 0; i < 5; i++ {
		ts := pcommon.NewTimestampFromTime(time.Now().Add(time.Duration(i) * time.Second))
		require.NoError(t, te.ConsumeMetrics(context.Background(), deltaBatch(300, ts, 1)))
	}
	require.NoError(t, te.stop())
	assertExactlyOnce(t, te.server.Datums(), 1500, 1500)
}

func TestConcurrencyIsBounded(t *testing.T) {
	te := newTestExporter(t, false, func(cfg *Config) { cfg.MaxConcurrentRequests = 2 })
	te.server.SetFaults(cloudwatchtest.Faults{Latency: 20 * time.Millisecond})
	require.NoError(t, te.ConsumeMetrics(context.Background(), deltaBatch(6000, newest(), 1)))
	assert.Equal(t, 6, te.server.Stats().Accepted)
	assert.Equal(t, 2, te.server.MaxInFlight(), "six requests, two at a time")
}

func TestCumulativeStateTelemetry(t *testing.T) {
	te := newTestExporter(t, false, func(cfg *Config) { cfg.CumulativeState.MaxSeries = 2 })
	start := pcommon.NewTimestampFromTime(time.Now().Add(-time.Minute))
	for i, series := range []string{"a", "b", "c"} {
		md := cumulativeSum(start, pcommon.NewTimestampFromTime(time.Now().Add(time.Duration(i)*time.Millisecond)), 5, map[string]string{"s": series})
		require.NoError(t, te.ConsumeMetrics(context.Background(), md))
	}
	assert.Equal(t, int64(1), te.counter(t, "cumulative_evictions", "")[""])
	m, err := te.telemetry.GetMetric("otelcol_exporter_cloudwatch_cumulative_series")
	require.NoError(t, err)
	assert.Equal(t, int64(2), m.Data.(metricdata.Sum[int64]).DataPoints[0].Value)
}

// The queue does not take an export (full, or with block_on_overflow the
// caller stops waiting for room): its cumulative points are not converted,
// so the next export's deltas cover them.
func TestQueueRefusalUndoesTheConversion(t *testing.T) {
	for name, block := range map[string]bool{"queue full": false, "caller gave up waiting for room": true} {
		t.Run(name, func(t *testing.T) {
			te := newTestExporter(t, true, func(cfg *Config) {
				q := cfg.QueueConfig.Get()
				q.QueueSize, q.NumConsumers, q.BlockOnOverflow = 1, 1, block
			})
			require.NoError(t, te.server.SetDown(true))
			begin := time.Now().Add(-time.Minute)
			start := pcommon.NewTimestampFromTime(begin)
			point := func(i int, v int64) pmetric.Metrics {
				return cumulativeSum(start, pcommon.NewTimestampFromTime(begin.Add(time.Duration(i)*time.Second)), v, nil)
			}
			// 10 fills the queue (its only consumer keeps retrying it).
			require.NoError(t, te.ConsumeMetrics(context.Background(), point(1, 10)))
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			require.Error(t, te.ConsumeMetrics(ctx, point(2, 25)), "the queue refuses 25")

			require.NoError(t, te.server.SetDown(false))
			require.Eventually(t, func() bool { return len(te.server.Datums()) == 1 }, 10*time.Second, 5*time.Millisecond)
			require.Eventually(t, func() bool {
				return te.ConsumeMetrics(context.Background(), point(3, 40)) == nil
			}, 10*time.Second, 10*time.Millisecond)
			require.NoError(t, te.stop())
			// 10 since start, then 40-10: the refused interval is covered.
			assert.Equal(t, []float64{10, 30}, sentValues(te.server, "requests"))
		})
	}
}

// Unpaced by default; a throttling answer paces the requests (the gauge
// shows the pace), and nothing is lost or sent twice meanwhile.
func TestThrottlingPacesRequests(t *testing.T) {
	te := newTestExporter(t, false, func(cfg *Config) { cfg.MaxConcurrentRequests = 1 })
	pace := func() float64 {
		m, err := te.telemetry.GetMetric("otelcol_exporter_cloudwatch_request_rate_limit")
		require.NoError(t, err)
		return m.Data.(metricdata.Gauge[float64]).DataPoints[0].Value
	}
	require.NoError(t, te.ConsumeMetrics(context.Background(), deltaBatch(3000, newest(), 1)))
	assert.Zero(t, pace(), "no ceiling and no throttling: unpaced")

	te.server.SetFaults(cloudwatchtest.Faults{ThrottleEvery: 2})
	require.NoError(t, te.ConsumeMetrics(context.Background(), deltaBatch(2500, newest(), 2)))
	assert.Positive(t, pace(), "throttled: paced")
	datums := te.server.Datums()
	assert.Len(t, datums, 5500)
	assertExactlyOnce(t, datums[3000:], 2500, 2*2500)
}

func TestSubsetCopiesOnlyTheGivenPoints(t *testing.T) {
	md := pmetric.NewMetrics()
	for r := 0; r < 2; r++ {
		rm := md.ResourceMetrics().AppendEmpty()
		rm.Resource().Attributes().PutInt("r", int64(r))
		sm := rm.ScopeMetrics().AppendEmpty()
		sm.Scope().SetName("scope")
		g := sm.Metrics().AppendEmpty()
		g.SetName("g")
		for p := 0; p < 3; p++ {
			g.SetEmptyGauge()
		}
		for p := 0; p < 3; p++ {
			g.Gauge().DataPoints().AppendEmpty().SetIntValue(int64(10*r + p))
		}
		s := sm.Metrics().AppendEmpty()
		s.SetName("s")
		s.SetUnit("By")
		sum := s.SetEmptySum()
		sum.SetIsMonotonic(true)
		sum.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
		sum.DataPoints().AppendEmpty().SetIntValue(int64(100 + r))
	}
	out := subset(md, []pointRef{{1, 0, 0, 2}, {0, 0, 1, 0}, {1, 0, 0, 0}, {1, 0, 0, 2}})

	require.Equal(t, 2, out.ResourceMetrics().Len())
	r0 := out.ResourceMetrics().At(0)
	v, _ := r0.Resource().Attributes().Get("r")
	assert.Equal(t, int64(0), v.Int())
	require.Equal(t, 1, r0.ScopeMetrics().At(0).Metrics().Len())
	s := r0.ScopeMetrics().At(0).Metrics().At(0)
	assert.Equal(t, "s", s.Name())
	assert.Equal(t, "By", s.Unit())
	assert.True(t, s.Sum().IsMonotonic())
	assert.Equal(t, pmetric.AggregationTemporalityDelta, s.Sum().AggregationTemporality())
	assert.Equal(t, int64(100), s.Sum().DataPoints().At(0).IntValue())

	r1 := out.ResourceMetrics().At(1)
	assert.Equal(t, "scope", r1.ScopeMetrics().At(0).Scope().Name())
	g := r1.ScopeMetrics().At(0).Metrics().At(0).Gauge().DataPoints()
	require.Equal(t, 2, g.Len(), "a repeated reference is copied once")
	assert.Equal(t, int64(10), g.At(0).IntValue())
	assert.Equal(t, int64(12), g.At(1).IntValue())
	assert.Equal(t, 3, out.DataPointCount())
}
