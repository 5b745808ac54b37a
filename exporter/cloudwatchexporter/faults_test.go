// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/metadatatest"
	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/translate"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
)

// containerCredentials is a local container credentials endpoint (what ECS
// and EKS Pod Identity serve), found by the SDK's default chain through
// AWS_CONTAINER_CREDENTIALS_FULL_URI. Its first answer holds key "AKIDOLD",
// every later one "AKIDNEW": a rotated key. firstDelay slows its first
// answer; failFirst answers the first request 500.
type containerCredentials struct {
	served     atomic.Int32
	firstDelay time.Duration
	failFirst  bool
}

const oldSecret = "old-secret-must-not-be-logged"

func (c *containerCredentials) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key, secret := "AKIDNEW", "new-secret-must-not-be-logged"
	if c.served.Add(1) == 1 {
		key, secret = "AKIDOLD", oldSecret
		if c.failFirst {
			http.Error(w, "credentials service unavailable", http.StatusInternalServerError)
			return
		}
		select {
		case <-time.After(c.firstDelay):
		case <-r.Context().Done():
			return
		}
	}
	_ = json.NewEncoder(w).Encode(map[string]string{
		"AccessKeyId": key, "SecretAccessKey": secret, "Token": "token",
		// Valid for an hour: without invalidation the cache would keep the old key.
		"Expiration": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
	})
}

// newObservedExporter is newTestExporter with the credentials taken from a
// containerCredentials endpoint and the logs observed.
func newObservedExporter(t *testing.T, creds *containerCredentials, tweak func(*Config)) (*testExporter, *containerCredentials, *observer.ObservedLogs) {
	t.Helper()
	if creds == nil {
		creds = &containerCredentials{}
	}
	credSrv := httptest.NewServer(creds)
	t.Cleanup(credSrv.Close)
	var te *testExporter
	var logs *observer.ObservedLogs
	te = newTestExporterWith(t, func(cfg *Config) {
		t.Setenv("AWS_ACCESS_KEY_ID", "")
		t.Setenv("AWS_SECRET_ACCESS_KEY", "")
		t.Setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", credSrv.URL+"/creds")
		if tweak != nil {
			tweak(cfg)
		}
	}, func() *zap.Logger {
		core, observed := observer.New(zapcore.InfoLevel)
		logs = observed
		return zap.New(core)
	})
	return te, creds, logs
}

// newTestExporterWith is newTestExporter with a logger of its own.
func newTestExporterWith(t *testing.T, tweak func(*Config), logger func() *zap.Logger) *testExporter {
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
	if tweak != nil {
		tweak(cfg)
	}
	require.NoError(t, cfg.Validate())
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tt.Shutdown(context.Background()) })
	set := metadatatest.NewSettings(tt)
	set.Logger = logger()
	exp, err := NewFactory().CreateMetrics(context.Background(), set, cfg)
	require.NoError(t, err)
	me := exp.(*metricsExporter)
	me.throttleDelay = 5 * time.Millisecond
	require.NoError(t, me.Start(context.Background(), componenttest.NewNopHost()))
	te := &testExporter{metricsExporter: me, server: server, telemetry: tt}
	t.Cleanup(func() { _ = te.stop() })
	return te
}

// A key rotated under the exporter: CloudWatch refuses the old key with each
// auth error code it answers; the exporter drops its cached credentials,
// retrieves the new key and the retry delivers every point exactly once.
func TestAuthErrorRefreshesCredentials(t *testing.T) {
	for _, code := range []string{
		"ExpiredToken", "ExpiredTokenException", "RequestExpired", "NotAuthorized",
		"InvalidClientTokenId", "SignatureDoesNotMatch", "UnrecognizedClientException",
	} {
		t.Run(code, func(t *testing.T) {
			te, creds, logs := newObservedExporter(t, nil, nil)
			te.server.SetFaults(cloudwatchtest.Faults{AcceptedAccessKeys: []string{"AKIDNEW"}, AuthErrorCode: code})

			require.NoError(t, te.ConsumeMetrics(context.Background(), deltaBatch(50, newest(), 2)))
			require.NoError(t, te.stop())

			assertExactlyOnce(t, te.server.Datums(), 50, 100)
			st := te.server.Stats()
			assert.Equal(t, 1, st.AuthErrors, "one refusal with the old key, then the new one")
			assert.Equal(t, 1, st.Accepted)
			assert.GreaterOrEqual(t, creds.served.Load(), int32(2), "credentials retrieved again")
			assert.Empty(t, te.counter(t, "points_dropped", "reason"))

			warned := logs.FilterMessageSnippet("refused the credentials").FilterField(zap.String("aws_error_code", code)).All()
			require.NotEmpty(t, warned, "a warning naming the AWS error code")
			assert.Equal(t, zapcore.WarnLevel, warned[0].Level)
			for _, l := range logs.All() {
				assert.NotContains(t, l.Message, oldSecret)
				for _, f := range l.Context {
					assert.NotContains(t, f.String, oldSecret)
					if err, ok := f.Interface.(error); ok {
						assert.NotContains(t, err.Error(), oldSecret)
					}
				}
			}
		})
	}
}

// CloudWatch lowering its size limit below what pack assumes: each refused
// request is split in halves until the parts pass; nothing is lost or sent twice.
func TestTooLargeRequestIsSplit(t *testing.T) {
	te := newTestExporter(t, false, nil)
	te.server.SetFaults(cloudwatchtest.Faults{MaxRequestBytes: 20_000})
	require.NoError(t, te.ConsumeMetrics(context.Background(), deltaBatch(2500, newest(), 1)))

	assertExactlyOnce(t, te.server.Datums(), 2500, 2500)
	tooLarge := 0
	for _, r := range te.server.Requests() {
		if r.ErrorCode == "RequestEntityTooLarge" {
			tooLarge++
		}
		if r.ErrorCode == "" {
			assert.LessOrEqual(t, r.BodyBytes, 20_000)
		}
	}
	assert.Positive(t, tooLarge, "the lowered limit was hit")
	assert.Empty(t, te.counter(t, "points_dropped", "reason"))
	assert.Equal(t, int64(tooLarge), te.counter(t, "requests", "outcome")["too_large_split"])
}

// A single datum larger than CloudWatch's limit is dropped with a counted
// reason; the other datums of its request are delivered.
func TestTooLargeSingleDatumIsDropped(t *testing.T) {
	te := newTestExporter(t, false, nil)
	md := gauges(5, 0, 0)
	big := gauges(1, 28, 1000) // about 30 kB as one datum
	big.ResourceMetrics().MoveAndAppendTo(md.ResourceMetrics())
	te.server.SetFaults(cloudwatchtest.Faults{MaxRequestBytes: 10_000})

	err := te.ConsumeMetrics(context.Background(), md)
	require.Error(t, err, "the refused datum is reported (permanent)")
	assert.Len(t, te.server.Datums(), 5)
	assert.Equal(t, map[string]int64{"rejected": 1}, te.counter(t, "points_dropped", "reason"))
	assert.True(t, strings.Contains(err.Error(), "RequestEntityTooLarge"), err.Error())
}

// Histograms whose parts contradict each other are dropped with their own
// counted reason, not sent with a sum bent to fit; a consistent neighbour is sent.
func TestInconsistentHistogramsAreDropped(t *testing.T) {
	te := newTestExporter(t, false, nil)
	md := pmetric.NewMetrics()
	h := newMetric(md, "latency", "s").SetEmptyHistogram()
	h.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	add := func(counts []uint64, count uint64, sum float64, minMax ...float64) {
		dp := h.DataPoints().AppendEmpty()
		dp.SetTimestamp(newest())
		fillHistogram(dp, []float64{1, 2}, counts, sum)
		dp.SetCount(count)
		if len(minMax) == 2 {
			dp.SetMin(minMax[0])
			dp.SetMax(minMax[1])
		}
	}
	add([]uint64{1, 2, 1}, 4, 6, 0.5, 3)  // consistent: sent
	add([]uint64{1, 2, 1}, 3, 6)          // count lower than the bucket sum
	add([]uint64{1, 2, 1}, 9, 6)          // count higher than the bucket sum
	add([]uint64{1, 2, 1}, 4, 20, 0.5, 3) // sum above count*max
	add([]uint64{1, 2, 1}, 4, 1, 0.5, 3)  // sum below count*min
	e := newMetric(md, "size", "By").SetEmptyExponentialHistogram()
	e.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	edp := e.DataPoints().AppendEmpty()
	edp.SetTimestamp(newest())
	edp.Positive().BucketCounts().FromRaw([]uint64{2, 3})
	edp.SetCount(4) // lower than the 5 in the buckets
	edp.SetSum(10)

	require.NoError(t, te.ConsumeMetrics(context.Background(), md))
	st, n := statistics(te.server.Datums(), "latency")
	require.Positive(t, n)
	assert.Equal(t, translate.StatisticSet{SampleCount: 4, Sum: 6, Min: 0.5, Max: 3}, st, "the consistent histogram, exact")
	_, n = statistics(te.server.Datums(), "size")
	assert.Zero(t, n)
	assert.Equal(t, map[string]int64{"inconsistent_histogram": 5}, te.counter(t, "points_dropped", "reason"))
}

// duplicates counts datums CloudWatch stored more than once (same series and timestamp).
func duplicates(datums []cloudwatchtest.Datum) int {
	seen := map[string]int{}
	dups := 0
	for _, d := range datums {
		k := seriesKey(d) + "@" + d.Timestamp.String()
		if seen[k]++; seen[k] > 1 {
			dups++
		}
	}
	return dups
}

// CloudWatch stores each request, then answers after the export's timeout.
// With request_timeout above the answer time the request is awaited and
// nothing is stored twice; cut off at the export's deadline (request_timeout
// below the answer time: what every request saw before request_timeout
// existed) each retry stores the same data again.
func TestSlowAnswerIsNotSentTwice(t *testing.T) {
	const answerDelay = 500 * time.Millisecond
	run := func(t *testing.T, requestTimeout time.Duration) (stored, dups int) {
		te := newTestExporter(t, true, func(cfg *Config) {
			cfg.Timeout = 200 * time.Millisecond
			cfg.RequestTimeout = requestTimeout
			cfg.BackOffConfig.MaxElapsedTime = 3 * time.Second
		})
		te.server.SetFaults(cloudwatchtest.Faults{AnswerDelay: answerDelay})
		const batches = 5
		for i := range batches {
			require.NoError(t, te.ConsumeMetrics(context.Background(),
				deltaBatch(20, pcommon.NewTimestampFromTime(time.Now().Add(time.Duration(i)*time.Second)), 1)))
		}
		require.Eventually(t, func() bool { return len(te.server.Datums()) >= batches*20 }, 60*time.Second, 20*time.Millisecond)
		require.NoError(t, te.stop())
		return len(te.server.Datums()), duplicates(te.server.Datums())
	}
	t.Run("request_timeout above the answer time", func(t *testing.T) {
		stored, dups := run(t, 5*time.Second)
		t.Logf("stored %d datums, %d duplicates", stored, dups)
		assert.Zero(t, dups)
		assert.Equal(t, 100, stored)
	})
	t.Run("cut off before the answer", func(t *testing.T) {
		stored, dups := run(t, 100*time.Millisecond)
		t.Logf("stored %d datums, %d duplicates", stored, dups)
		assert.Positive(t, dups, "the fault reproduces: a cut-off request is stored again by its retry")
	})
}

// Names CloudWatch refuses (a control character, invalid UTF-8 in a metric
// name; the same or a non-ASCII character in a dimension) are sanitized and
// counted: the request is accepted and the neighbours in it are delivered.
func TestBadNamesAreSanitizedNotRefused(t *testing.T) {
	te := newTestExporter(t, false, nil)
	md := pmetric.NewMetrics()
	add := func(name string, attrs map[string]string) {
		dp := newMetric(md, name, "1").SetEmptyGauge().DataPoints().AppendEmpty()
		dp.SetTimestamp(newest())
		dp.SetDoubleValue(1)
		for k, v := range attrs {
			dp.Attributes().PutStr(k, v)
		}
	}
	add("queue\x01depth", nil)
	add("bytes\xff\xfein", nil)
	add("latency", map[string]string{"route": "/a\x00b", "bad\xffkey": "x", "blank": "  "})
	add("neighbour", map[string]string{"route": "/ok"})

	require.NoError(t, te.ConsumeMetrics(context.Background(), md))
	assert.Equal(t, cloudwatchtest.Stats{Requests: 1, Accepted: 1}, te.server.Stats(), "one request, accepted")
	got := map[string]map[string]string{}
	for _, d := range te.server.Datums() {
		got[d.MetricName] = d.Dimensions
	}
	assert.Contains(t, got, "queue_depth")
	assert.Contains(t, got, "bytes__in")
	assert.Equal(t, map[string]string{"route": "/a_b", "bad_key": "x", "service.name": "svc"}, got["latency"])
	assert.Equal(t, map[string]string{"route": "/ok", "service.name": "svc"}, got["neighbour"])
	assert.Equal(t, map[string]int64{"metric_name_sanitized": 2, "dimension_sanitized": 1, "dimension_dropped": 1},
		te.counter(t, "points_altered", "reason"))
	assert.Empty(t, te.counter(t, "points_dropped", "reason"))
}

// The endpoint refuses a request holding such a name, as CloudWatch does:
// what the test above guards against.
func TestEndpointRefusesBadMetricNames(t *testing.T) {
	for _, name := range []string{"queue\x01depth", "bytes\xff\xfein"} {
		te := newTestExporter(t, false, nil)
		p := te.putter
		err := p.Put(context.Background(), "Test", []translate.Datum{
			{Name: name, Kind: translate.KindValue, Value: 1, Timestamp: newest(), Resolution: 60},
			{Name: "neighbour", Kind: translate.KindValue, Value: 1, Timestamp: newest(), Resolution: 60},
		})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "InvalidParameterValue")
		assert.Empty(t, te.server.Datums(), "the whole request is refused")
	}
}

// A job id in a metric attribute: 30,000 distinct values beside a
// well-behaved neighbour. Billed series of that metric stay within
// max_series_per_metric plus the overflow series, no increment is lost
// (the overflow series carries the rest), the neighbour is exact, and one
// warning names the metric and the exploding dimension.
func TestCardinalityFloodIsBoundedPerMetric(t *testing.T) {
	var logs *observer.ObservedLogs
	te := newTestExporterWith(t, func(cfg *Config) {
		cfg.QueueConfig = configoptional.None[exporterhelper.QueueBatchConfig]()
		cfg.MaxSeriesPerMetric = defaultMaxSeriesPerMetric
	}, func() *zap.Logger {
		core, observed := observer.New(zapcore.InfoLevel)
		logs = observed
		return zap.New(core)
	})
	const jobs = 30_000
	now := newest()
	md := pmetric.NewMetrics()
	sum := newMetric(md, "build.jobs", "{job}").SetEmptySum()
	sum.SetIsMonotonic(true)
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	for i := range jobs {
		dp := sum.DataPoints().AppendEmpty()
		dp.SetTimestamp(now)
		dp.SetIntValue(1)
		dp.Attributes().PutStr("job.id", fmt.Sprintf("job-%05d", i))
		dp.Attributes().PutStr("build.engine", "faiss")
	}
	gpu := newMetric(md, "gpu.utilization", "1").SetEmptyGauge().DataPoints()
	for i, v := range []float64{0.25, 0.5, 0.75} {
		dp := gpu.AppendEmpty()
		dp.SetTimestamp(now)
		dp.SetDoubleValue(v)
		dp.Attributes().PutInt("gpu.index", int64(i))
	}

	require.NoError(t, te.ConsumeMetrics(context.Background(), md))

	series := map[string]bool{}
	total := 0.0
	neighbour := map[string]float64{}
	for _, d := range te.server.Datums() {
		switch d.MetricName {
		case "build.jobs":
			series[seriesKey(d)] = true
			total += *d.Value
		case "gpu.utilization":
			neighbour[d.Dimensions["gpu.index"]] = *d.Value
		}
	}
	assert.Len(t, series, defaultMaxSeriesPerMetric+1, "the budget plus one overflow series")
	assert.True(t, series["build.jobs{otel.metric.overflow=true}"])
	assert.Equal(t, float64(jobs), total, "no increment lost")
	assert.Equal(t, map[string]float64{"0": 0.25, "1": 0.5, "2": 0.75}, neighbour, "the neighbour is exact")
	assert.Equal(t, map[string]int64{"series_overflow": jobs - defaultMaxSeriesPerMetric},
		te.counter(t, "points_altered", "reason"))
	warned := logs.FilterMessageSnippet("max_series_per_metric").All()
	require.Len(t, warned, 1, "rate limited")
	assert.Equal(t, zapcore.WarnLevel, warned[0].Level)
	fields := warned[0].ContextMap()
	assert.Equal(t, "build.jobs", fields["metric"])
	assert.Equal(t, "job.id", fields["exploding_dimension"])
}

// The cumulative state cap reached by a stream of new cumulative series (a
// job id as an attribute, new ids every interval): the least recently
// updated series (finished jobs) are evicted, so a neighbour updated every
// interval keeps its place and each of its deltas is exact. New series
// that come after an eviction with a start time not after the forgotten
// points are baselines (a forgotten series cannot be told from a new one):
// counted as cumulative_baseline, so every point is accounted for.
func TestCumulativeFloodKeepsTheNeighbourExact(t *testing.T) {
	const maxSeries, rounds, flood = 100, 5, 60
	te := newTestExporter(t, false, func(cfg *Config) { cfg.CumulativeState.MaxSeries = maxSeries })
	begin := time.Now().Add(-10 * time.Minute)
	start := pcommon.NewTimestampFromTime(begin)
	for r := 1; r <= rounds; r++ {
		ts := pcommon.NewTimestampFromTime(begin.Add(time.Duration(r) * time.Minute))
		md := cumulativeSum(start, ts, int64(10*r), map[string]string{"route": "neighbour"})
		sum := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum()
		for i := range flood {
			dp := sum.DataPoints().AppendEmpty()
			dp.SetStartTimestamp(start)
			dp.SetTimestamp(ts)
			dp.SetIntValue(1)
			dp.Attributes().PutStr("job.id", fmt.Sprintf("r%d-job-%d", r, i))
		}
		require.NoError(t, te.ConsumeMetrics(context.Background(), md))
	}
	var neighbour []float64
	jobs := 0.0
	for _, d := range te.server.Datums() {
		if d.Dimensions["route"] == "neighbour" {
			neighbour = append(neighbour, *d.Value)
		} else {
			jobs += *d.Value
		}
	}
	assert.Equal(t, []float64{10, 10, 10, 10, 10}, neighbour, "no increment of the neighbour lost")
	baselines := te.counter(t, "points_dropped", "reason")["cumulative_baseline"]
	assert.Positive(t, baselines)
	assert.Equal(t, float64(rounds*flood), jobs+float64(baselines), "every job point sent or counted")
	assert.Positive(t, te.counter(t, "cumulative_evictions", "")[""])
}

// More new series in one interval than the whole cap (150 against 100),
// from the third interval on, beside a neighbour updated every interval:
// the flood churns through the series seen once and the established
// neighbour keeps every delta.
func TestCumulativeFloodBeyondTheCapKeepsTheNeighbourExact(t *testing.T) {
	const maxSeries, rounds, flood = 100, 6, 150
	te := newTestExporter(t, false, func(cfg *Config) { cfg.CumulativeState.MaxSeries = maxSeries })
	begin := time.Now().Add(-10 * time.Minute)
	start := pcommon.NewTimestampFromTime(begin)
	for r := 1; r <= rounds; r++ {
		ts := pcommon.NewTimestampFromTime(begin.Add(time.Duration(r) * time.Minute))
		md := cumulativeSum(start, ts, int64(10*r), map[string]string{"route": "neighbour"})
		sum := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum()
		for i := range flood {
			if r < 3 {
				break
			}
			dp := sum.DataPoints().AppendEmpty()
			dp.SetStartTimestamp(ts)
			dp.SetTimestamp(ts)
			dp.SetIntValue(1)
			dp.Attributes().PutStr("job.id", fmt.Sprintf("r%d-job-%d", r, i))
		}
		require.NoError(t, te.ConsumeMetrics(context.Background(), md))
	}
	var neighbour []float64
	for _, d := range te.server.Datums() {
		if d.Dimensions["route"] == "neighbour" {
			neighbour = append(neighbour, *d.Value)
		}
	}
	assert.Equal(t, []float64{10, 10, 10, 10, 10, 10}, neighbour, "no increment of the neighbour lost")
	assert.Equal(t, int64((rounds-2)*flood+1-maxSeries), te.counter(t, "cumulative_evictions", "")[""], "only flood series evicted")
}
