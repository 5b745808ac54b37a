// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter

import (
	"bytes"
	stdgzip "compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/klauspost/compress/gzip"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/delta"
	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/send"
	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/translate"
	"github.com/gpubuild/otelcol-gpubuild/internal/state/journal"
)

// mixedBatch is what one export of the GPU build service and its GPU
// receiver looks like, scaled by gpus: per GPU 10 gauges, 4 cumulative
// counters and an up-down counter with 4 attribute sets each, and per
// stage (4) a 16-bucket duration histogram and a 40-bucket exponential
// size histogram: 38 data points per GPU, 7 resource attributes each.
func mixedBatch(gpus int, start, now pcommon.Timestamp, step int) pmetric.Metrics {
	md := pmetric.NewMetrics()
	stages := []string{"download", "gpu_build", "gpu_to_cpu", "upload"}
	bounds := []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250}
	for g := 0; g < gpus; g++ {
		rm := md.ResourceMetrics().AppendEmpty()
		res := rm.Resource().Attributes()
		res.PutStr("service.name", "vector-index-builder")
		res.PutStr("service.instance.id", "pod-3f9c")
		res.PutStr("deployment.environment.name", "prod")
		res.PutStr("gpu.uuid", fmt.Sprintf("GPU-5a1c%04d-7f3e-11ee-b962-0242ac120002", g))
		res.PutInt("gpu.index", int64(g))
		res.PutStr("gpu.model", "NVIDIA H100 80GB HBM3")
		res.PutStr("host.name", "ip-10-0-3-17")
		ms := rm.ScopeMetrics().AppendEmpty().Metrics()

		for i, name := range []string{"gpu.utilization", "gpu.memory.utilization", "gpu.memory.used", "gpu.memory.free",
			"gpu.temperature", "gpu.power.draw", "gpu.clock.sm", "gpu.clock.memory", "gpu.pcie.rx", "gpu.pcie.tx"} {
			m := ms.AppendEmpty()
			m.SetName(name)
			m.SetUnit([]string{"1", "1", "By", "By", "Cel", "W", "MHz", "MHz", "By/s", "By/s"}[i])
			dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
			dp.SetTimestamp(now)
			dp.SetDoubleValue(float64(g*10+i) + float64(step))
		}
		for _, name := range []string{"gpu.energy", "gpu.xid.errors", "indexbuild.jobs", "indexbuild.bytes"} {
			m := ms.AppendEmpty()
			m.SetName(name)
			m.SetUnit("{item}")
			sum := m.SetEmptySum()
			sum.SetIsMonotonic(true)
			sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
			for a := 0; a < 4; a++ {
				dp := sum.DataPoints().AppendEmpty()
				dp.SetStartTimestamp(start)
				dp.SetTimestamp(now)
				dp.SetIntValue(int64(1000*(step+1) + a))
				dp.Attributes().PutStr("result", []string{"success", "failure", "error", "timeout"}[a])
			}
		}
		running := ms.AppendEmpty()
		running.SetName("indexbuild.jobs.running")
		running.SetUnit("{job}")
		rs := running.SetEmptySum()
		rs.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		for a := 0; a < 4; a++ {
			dp := rs.DataPoints().AppendEmpty()
			dp.SetTimestamp(now)
			dp.SetIntValue(int64(a))
			dp.Attributes().PutStr("stage", stages[a])
		}

		dur := ms.AppendEmpty()
		dur.SetName("indexbuild.stage.duration")
		dur.SetUnit("s")
		h := dur.SetEmptyHistogram()
		h.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		size := ms.AppendEmpty()
		size.SetName("indexbuild.vector.bytes")
		size.SetUnit("By")
		e := size.SetEmptyExponentialHistogram()
		e.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
		for s, stage := range stages {
			dp := h.DataPoints().AppendEmpty()
			dp.SetStartTimestamp(start)
			dp.SetTimestamp(now)
			dp.Attributes().PutStr("stage", stage)
			counts := make([]uint64, len(bounds)+1)
			var sum float64
			var n uint64
			for i := range counts {
				counts[i] = uint64((i*7+s+step)%5) * uint64(step+1)
				n += counts[i]
				if i < len(bounds) {
					sum += float64(counts[i]) * bounds[i] * 0.9
				} else {
					sum += float64(counts[i]) * 300
				}
			}
			dp.ExplicitBounds().FromRaw(bounds)
			dp.BucketCounts().FromRaw(counts)
			dp.SetCount(n)
			dp.SetSum(sum)
			dp.SetMin(0.004)
			dp.SetMax(300)

			ep := e.DataPoints().AppendEmpty()
			ep.SetTimestamp(now)
			ep.Attributes().PutStr("stage", stage)
			ep.SetScale(2)
			ep.Positive().SetOffset(80)
			pc := make([]uint64, 40)
			n = 0
			for i := range pc {
				pc[i] = uint64((i + s) % 3)
				n += pc[i]
			}
			ep.Positive().BucketCounts().FromRaw(pc)
			ep.SetCount(n)
			ep.SetSum(float64(n) * 1.5e6)
		}
	}
	return md
}

// convertedBatch is mixedBatch after delta conversion (its second export, so
// the cumulative points become real deltas).
func convertedBatch(gpus int) pmetric.Metrics {
	now := time.Now()
	start := pcommon.NewTimestampFromTime(now.Add(-time.Hour))
	conv := delta.NewConverter(CumulativeStateConfig{TTL: time.Hour, MaxSeries: 1 << 20}.trackerConfig())
	var d translate.DropCounts
	convertInto(conv, mixedBatch(gpus, start, pcommon.NewTimestampFromTime(now.Add(-time.Minute)), 0), now, &d)
	md := mixedBatch(gpus, start, pcommon.NewTimestampFromTime(now), 1)
	convertInto(conv, md, now, &d)
	return md
}

// BenchmarkTranslate measures pdata -> datums for a mixed batch on one
// goroutine, reusing buffers as the exporter does.
func BenchmarkTranslate(b *testing.B) {
	for _, gpus := range []int{8, 64} {
		b.Run(fmt.Sprintf("gpus=%d", gpus), func(b *testing.B) {
			md := convertedBatch(gpus)
			points := md.DataPointCount()
			tl := translate.NewTranslator(translatorConfig(testConfig()))
			var tr translate.Translation
			now := time.Now()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				tr.Reset()
				tl.Translate(md, now, &tr)
			}
			b.ReportMetric(float64(points)*float64(b.N)/b.Elapsed().Seconds(), "points/s")
			b.ReportMetric(float64(len(tr.Datums)), "datums/batch")
			b.ReportMetric(float64(points), "points/batch")
		})
	}
}

// BenchmarkConvert measures the cumulative-to-delta step (stateful, under
// its lock) on fresh batches; building the batch is not timed.
func BenchmarkConvert(b *testing.B) {
	const gpus = 64
	now := time.Now()
	start := pcommon.NewTimestampFromTime(now.Add(-time.Hour))
	conv := delta.NewConverter(CumulativeStateConfig{TTL: time.Hour, MaxSeries: 1 << 20}.trackerConfig())
	template := mixedBatch(gpus, start, pcommon.NewTimestampFromTime(now), 0)
	points := template.DataPointCount()
	var cv delta.Conversion
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		md := mixedBatch(gpus, start, pcommon.NewTimestampFromTime(now.Add(time.Duration(i)*time.Second)), i)
		b.StartTimer()
		cv.Reset()
		conv.Convert(ctx, md, now, &cv)
	}
	b.ReportMetric(float64(points)*float64(b.N)/b.Elapsed().Seconds(), "points/s")
}

// BenchmarkConvertSaved is BenchmarkConvert with state.storage:
// each batch's 1,280 cumulative series are also written, in one Batch, to
// an in-memory storage (the cost of encoding), to a real file_storage
// (bbolt, no fsync: its default), or through the journal into it (as
// shipped: its checkpoints, every 8 MiB of saves here, included).
func BenchmarkConvertSaved(b *testing.B) {
	const gpus = 64
	for _, name := range []string{"memory", "file_storage", "file_storage+journal"} {
		b.Run("storage="+name, func(b *testing.B) {
			ctx := context.Background()
			dir := b.TempDir()
			var ext storage.Extension = &diskStorage{disk: newDisk(), walk: true}
			if name != "memory" {
				ext = newFileStorage(b, dir).(storage.Extension)
			}
			client, err := ext.GetClient(ctx, component.KindExporter, component.MustNewID("cloudwatch"), cumulativeStateStorageName)
			if err != nil {
				b.Fatal(err)
			}
			if name == "file_storage+journal" {
				client, _, err = journal.Open(ctx, client, filepath.Join(dir, "journal"), journal.Config{CheckpointInterval: time.Hour})
				if err != nil {
					b.Fatal(err)
				}
			}
			defer client.Close(ctx)
			now := time.Now()
			start := pcommon.NewTimestampFromTime(now.Add(-time.Hour))
			conv := delta.NewConverter(CumulativeStateConfig{TTL: time.Hour, MaxSeries: 1 << 20}.trackerConfig())
			conv.AttachStorage(ctx, client, now)
			points := mixedBatch(gpus, start, pcommon.NewTimestampFromTime(now), 0).DataPointCount()
			var cv delta.Conversion
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				md := mixedBatch(gpus, start, pcommon.NewTimestampFromTime(now.Add(time.Duration(i)*time.Second)), i)
				b.StartTimer()
				cv.Reset()
				conv.Convert(ctx, md, now, &cv)
				if err := conv.Save(ctx, cv.Records); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(points)*float64(b.N)/b.Elapsed().Seconds(), "points/s")
			b.ReportMetric(float64(conv.Tracker.LargestSaveBytes()), "saved_bytes/largest_batch")
		})
	}
}

// BenchmarkPack packs a flush and reports the requests it needs against the
// lower bound ceil(datums/1000).
func BenchmarkPack(b *testing.B) {
	for _, gpus := range []int{8, 64, 512} {
		b.Run(fmt.Sprintf("gpus=%d", gpus), func(b *testing.B) {
			md := convertedBatch(gpus)
			var tr translate.Translation
			translate.NewTranslator(translatorConfig(testConfig())).Translate(md, time.Now(), &tr)
			var reqs []translate.PackedRequest
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				reqs = translate.Pack(tr.Datums, "GPUBuild", reqs[:0])
			}
			bound := (len(tr.Datums) + translate.MaxDatumsPerRequest - 1) / translate.MaxDatumsPerRequest
			b.ReportMetric(float64(len(tr.Datums)), "datums")
			b.ReportMetric(float64(len(reqs)), "requests")
			b.ReportMetric(float64(bound), "lower_bound")
		})
	}
}

// accepting answers every request with success, reading only its bytes:
// the benchmark then measures the exporter and the SDK, not a server.
type accepting struct{ requests, bodyBytes *int64 }

func (a accepting) Do(r *http.Request) (*http.Response, error) {
	n, _ := io.Copy(io.Discard, r.Body)
	*a.requests++
	*a.bodyBytes += n
	return &http.Response{
		StatusCode: http.StatusOK,
		Header:     http.Header{"Content-Type": {"application/cbor"}, "Smithy-Protocol": {"rpc-v2-cbor"}},
		Body:       io.NopCloser(bytes.NewReader([]byte{0xa0})),
		Request:    r,
	}, nil
}

// BenchmarkExport measures the whole push of a flush on the client side:
// translate, pack, and the SDK (serialize to CBOR, gzip, sign).
func BenchmarkExport(b *testing.B) {
	const gpus = 64
	var requests, bodyBytes int64
	client := cloudwatch.New(cloudwatch.Options{
		Region:       "eu-west-1",
		BaseEndpoint: aws.String("http://cloudwatch.invalid"),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
		Retryer:      aws.NopRetryer{},
		HTTPClient:   accepting{&requests, &bodyBytes},
	})
	cfg := testConfig()
	e, err := newMetricsExporter(cfg, exporterSettings())
	if err != nil {
		b.Fatal(err)
	}
	e.putter = send.NewPutter(client)
	md := convertedBatch(gpus)
	points := md.DataPointCount()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := e.pushMetrics(context.Background(), md); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(points)*float64(b.N)/b.Elapsed().Seconds(), "points/s")
	b.ReportMetric(float64(requests)/float64(b.N), "requests/flush")
	b.ReportMetric(float64(bodyBytes)/float64(b.N), "wire_bytes/flush")
}

// BenchmarkCompressBody gzips one PutMetricData body of 1000 datums (a
// full request of the mixed batch) as the exporter does (the standard
// library's default level, the SDK's) and at klauspost's fastest level:
// CPU per body against the bytes sent (BENCHMARKS.md, "Translation").
func BenchmarkCompressBody(b *testing.B) {
	var tr translate.Translation
	translate.NewTranslator(translatorConfig(testConfig())).Translate(convertedBatch(64), time.Now(), &tr)
	raw := translate.AppendPutMetricData(nil, "GPUBuild/Test", tr.Datums[:1000])
	run := func(b *testing.B, w interface {
		io.WriteCloser
		Reset(io.Writer)
	}, dst *bytes.Buffer) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			dst.Reset()
			w.Reset(dst)
			_, _ = w.Write(raw)
			_ = w.Close()
		}
		b.ReportMetric(float64(dst.Len()), "sent-bytes")
	}
	b.Run("exporter", func(b *testing.B) {
		var dst bytes.Buffer
		run(b, stdgzip.NewWriter(&dst), &dst)
	})
	b.Run("fastest", func(b *testing.B) {
		var dst bytes.Buffer
		w, err := gzip.NewWriterLevel(&dst, gzip.BestSpeed)
		if err != nil {
			b.Fatal(err)
		}
		run(b, w, &dst)
	})
}
