// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/metadata"
	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/send"
	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/translate"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
)

// startWith creates and starts an exporter with cfg and an observed logger;
// stop shuts it down (once; the test cleanup calls it too).
func startWith(t *testing.T, cfg *Config) (exp *metricsExporter, logs *observer.ObservedLogs, stop func() error) {
	t.Helper()
	core, logs := observer.New(zapcore.InfoLevel)
	set := exportertest.NewNopSettings(metadata.Type)
	set.Logger = zap.New(core)
	created, err := NewFactory().CreateMetrics(context.Background(), set, cfg)
	require.NoError(t, err)
	require.NoError(t, created.Start(context.Background(), componenttest.NewNopHost()))
	stop = sync.OnceValue(func() error { return created.Shutdown(context.Background()) })
	t.Cleanup(func() { _ = stop() })
	return created.(*metricsExporter), logs, stop
}

func readLines(t *testing.T, path string) []translate.DryRunRequest {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []translate.DryRunRequest
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var r translate.DryRunRequest
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r), sc.Text())
		out = append(out, r)
	}
	return out
}

func TestDryRunWritesThePutMetricDataRequest(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dryrun.jsonl")
	cfg := testConfig()
	cfg.Namespace = "GPUBuild/Dry"
	cfg.OutputDestination = destinationFile
	cfg.OutputPath = path
	cfg.QueueConfig = configoptional.None[exporterhelper.QueueBatchConfig]()
	exp, _, stop := startWith(t, cfg)

	when := time.Now().UTC().Truncate(time.Millisecond)
	md := pmetric.NewMetrics()
	g := newMetric(md, "gpu.memory.used", "By").SetEmptyGauge().DataPoints().AppendEmpty()
	g.SetTimestamp(ts(when))
	g.SetIntValue(1 << 30)
	g.Attributes().PutStr("gpu.uuid", "GPU-0")
	h := newMetric(md, "stage.duration", "s").SetEmptyHistogram()
	h.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	hp := h.DataPoints().AppendEmpty()
	hp.SetTimestamp(ts(when))
	fillHistogram(hp, []float64{1}, []uint64{1, 1}, 3)
	hp.SetMin(0.5)
	hp.SetMax(2.5)
	s := newMetric(md, "rpc", "ms").SetEmptyHistogram()
	s.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	sp := s.DataPoints().AppendEmpty()
	sp.SetTimestamp(ts(when))
	sp.SetCount(2)
	sp.SetSum(10)
	require.NoError(t, exp.ConsumeMetrics(context.Background(), md))
	require.NoError(t, stop())

	reqs := readLines(t, path)
	require.Len(t, reqs, 1, "one request, one line")
	assert.Equal(t, "GPUBuild/Dry", reqs[0].Namespace)
	stamp := when.Format("2006-01-02T15:04:05.000Z")
	assert.Equal(t, []translate.DryRunDatum{
		{
			MetricName: "gpu.memory.used", Timestamp: stamp, Value: ptr(float64(1 << 30)), Unit: "Bytes", StorageResolution: 60,
			Dimensions: []translate.DryRunDimension{{Name: "gpu.uuid", Value: "GPU-0"}, {Name: "service.name", Value: "svc"}},
		},
		{
			MetricName: "stage.duration", Timestamp: stamp, Values: []float64{0.5, 2.5}, Counts: []float64{1, 1}, Unit: "Seconds", StorageResolution: 60,
			Dimensions: []translate.DryRunDimension{{Name: "service.name", Value: "svc"}},
		},
		{
			MetricName: "rpc", Timestamp: stamp, Unit: "Milliseconds", StorageResolution: 60,
			StatisticValues: &translate.DryRunStatistics{SampleCount: 2, Sum: 10, Minimum: 5, Maximum: 5},
			Dimensions:      []translate.DryRunDimension{{Name: "service.name", Value: "svc"}},
		},
	}, reqs[0].MetricData)
}

func ptr[T any](v T) *T { return &v }

func TestAutoWithoutAWSIsADryRunOnStdout(t *testing.T) {
	isolateAWS(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	cfg := testConfig()
	cfg.OutputDestination = destinationAuto
	exp, logs, _ := startWith(t, cfg)

	assert.True(t, exp.dryRun.Load())
	auto, ok := exp.putter.(*send.AutoPutter)
	require.True(t, ok)
	assert.Equal(t, send.AutoDryRun, send.AutoState(auto.State.Load()))
	p, ok := auto.DryRun.(*send.DryRunPutter)
	require.True(t, ok)
	assert.Equal(t, os.Stdout, p.W)
	logs = withoutInMemoryNotice(logs)
	require.Equal(t, 1, logs.Len(), "exactly one line explains the dry run")
	assert.Contains(t, logs.All()[0].Message, "No AWS region or credentials found")
	assert.Contains(t, logs.All()[0].Message, "dry run")
}

func TestAutoWithRegionAndCredentialsSends(t *testing.T) {
	isolateAWS(t)
	server, err := cloudwatchtest.Start("127.0.0.1:0")
	require.NoError(t, err)
	defer server.Close()
	cfg := testConfig()
	cfg.OutputDestination = destinationAuto
	cfg.Region = "us-east-1"
	cfg.Endpoint = server.Endpoint()
	cfg.QueueConfig = configoptional.None[exporterhelper.QueueBatchConfig]()
	exp, logs, _ := startWith(t, cfg)

	assert.False(t, exp.dryRun.Load())
	assert.Zero(t, withoutInMemoryNotice(logs).Len())
	md := gaugeMetrics("g", "", 1)
	md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Gauge().DataPoints().At(0).SetTimestamp(newest())
	require.NoError(t, exp.ConsumeMetrics(context.Background(), md))
	assert.Equal(t, cloudwatchtest.Stats{Requests: 1, Accepted: 1}, server.Stats())
}

func TestCloudWatchWithoutRegionFailsToStart(t *testing.T) {
	isolateAWS(t)
	cfg := testConfig()
	exp, err := NewFactory().CreateMetrics(context.Background(), exportertest.NewNopSettings(metadata.Type), cfg)
	require.NoError(t, err)
	err = exp.Start(context.Background(), componenttest.NewNopHost())
	assert.ErrorContains(t, err, "region: not set")
	assert.NotContains(t, err.Error(), "wJalrXUtnFEMI", "credentials never appear in errors")
}
