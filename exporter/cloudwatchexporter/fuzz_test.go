// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter

import (
	"bytes"
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/delta"
	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/send"
	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/translate"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
)

// inProcess is an SDK HTTP client that hands requests straight to a
// cloudwatchtest server: the real serialization, compression and
// CloudWatch's validation, without sockets.
type inProcess struct{ server *cloudwatchtest.Server }

func (c inProcess) Do(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	c.server.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// fuzzPoint describes one metric built from fuzzer input.
type fuzzPoint struct {
	name, unit, key, value string
	kind                   uint8
	a, b, c                float64
	n                      uint64
	raw                    []byte
	tsOffset               int64
	scale                  int8
}

// build makes the metric of p; step > 0 makes a later point of the same
// series (for cumulative kinds), with values that grew or, at random, fell.
func (p fuzzPoint) build(now time.Time, step int) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", p.value)
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName(p.name)
	m.SetUnit(p.unit)
	ts := pcommon.NewTimestampFromTime(now.Add(time.Duration(p.tsOffset) + time.Duration(step)*time.Second))
	start := pcommon.Timestamp(0)
	if p.kind&0x80 == 0 {
		start = pcommon.NewTimestampFromTime(now.Add(-time.Hour))
	}
	grow := float64(step) * p.c
	temporality := pmetric.AggregationTemporalityDelta
	if p.kind&0x40 != 0 {
		temporality = pmetric.AggregationTemporalityCumulative
	}
	counts := make([]uint64, 0, len(p.raw))
	for _, b := range p.raw {
		counts = append(counts, uint64(b%8)+uint64(step)*uint64(b%3))
	}
	total := uint64(0)
	for _, c := range counts {
		total += c
	}

	switch p.kind % 6 {
	case 0:
		dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
		dp.SetTimestamp(ts)
		dp.SetDoubleValue(p.a + grow)
		dp.Attributes().PutStr(p.key, p.value)
	case 1, 2:
		sum := m.SetEmptySum()
		sum.SetIsMonotonic(p.kind%6 == 2)
		sum.SetAggregationTemporality(temporality)
		dp := sum.DataPoints().AppendEmpty()
		dp.SetStartTimestamp(start)
		dp.SetTimestamp(ts)
		if p.kind&0x20 != 0 {
			dp.SetIntValue(int64(p.n) + int64(step)*int64(p.n%7))
		} else {
			dp.SetDoubleValue(p.a + grow)
		}
		dp.Attributes().PutStr(p.key, p.value)
	case 3:
		h := m.SetEmptyHistogram()
		h.SetAggregationTemporality(temporality)
		dp := h.DataPoints().AppendEmpty()
		dp.SetStartTimestamp(start)
		dp.SetTimestamp(ts)
		bounds := make([]float64, 0, len(counts))
		v := p.a
		for i := 1; i < len(counts); i++ {
			if p.kind&0x20 != 0 {
				v = p.b * float64(p.raw[i]) // may be unsorted or repeated
			} else {
				v += math.Abs(p.b)*float64(p.raw[i]) + 1
			}
			bounds = append(bounds, v)
		}
		dp.ExplicitBounds().FromRaw(bounds)
		dp.BucketCounts().FromRaw(counts)
		dp.SetCount(total + p.n%2) // sometimes inconsistent
		dp.SetSum(p.b + grow)
		if p.n&4 != 0 {
			dp.SetMin(p.a)
		}
		if p.n&8 != 0 {
			dp.SetMax(p.c)
		}
		dp.Attributes().PutStr(p.key, p.value)
	case 4:
		h := m.SetEmptyExponentialHistogram()
		h.SetAggregationTemporality(temporality)
		dp := h.DataPoints().AppendEmpty()
		dp.SetStartTimestamp(start)
		dp.SetTimestamp(ts)
		dp.SetScale(int32(p.scale)%21 - int32(step)) // the SDK may lower the scale
		posOffset, negOffset := int32(p.n>>8)%2000, -int32(p.n>>16)%2000
		if p.kind&0x10 != 0 { // OTLP allows any offset: buckets far out of CloudWatch's range
			posOffset, negOffset = int32(uint32(p.n>>8)), int32(uint32(p.n>>24))
		}
		dp.Positive().SetOffset(posOffset)
		dp.Positive().BucketCounts().FromRaw(counts)
		dp.Negative().SetOffset(negOffset)
		dp.Negative().BucketCounts().FromRaw(counts[:len(counts)/2])
		dp.SetZeroCount(p.n % 5)
		dp.SetZeroThreshold(math.Abs(p.c))
		dp.SetCount(total + total/2 + p.n%5)
		dp.SetSum(p.a + grow)
		if p.n&4 != 0 {
			dp.SetMin(p.b)
		}
		if p.n&8 != 0 {
			dp.SetMax(p.c)
		}
		dp.Attributes().PutStr(p.key, p.value)
	case 5:
		dp := m.SetEmptySummary().DataPoints().AppendEmpty()
		dp.SetStartTimestamp(start)
		dp.SetTimestamp(ts)
		dp.SetCount(p.n + uint64(step))
		dp.SetSum(p.a + grow)
		q := dp.QuantileValues().AppendEmpty()
		q.SetQuantile(0)
		q.SetValue(p.b)
		q = dp.QuantileValues().AppendEmpty()
		q.SetQuantile(1)
		q.SetValue(p.c)
		dp.Attributes().PutStr(p.key, p.value)
	}
	return md
}

// FuzzTranslate feeds arbitrary metrics through the delta conversion,
// translation and packing, and sends every request through the real SDK to
// the cloudwatchtest server: nothing may panic and CloudWatch must accept
// every request.
func FuzzTranslate(f *testing.F) {
	f.Add("gpu.utilization", "%", "gpu.uuid", "GPU-0", uint8(0), 0.5, 1.0, 2.0, uint64(3), []byte{1, 2, 3}, int64(0), int8(0))
	f.Add("bytes", "By", "k", "v", uint8(2|0x40), 100.0, 5.0, 7.0, uint64(9), []byte{}, int64(-time.Hour), int8(3))
	f.Add("latency", "ms", "stage", "upload", uint8(3|0x40), 0.0, 10.0, 500.0, uint64(12), []byte{0, 5, 9, 3, 250}, int64(0), int8(0))
	f.Add("sizes", "KiBy", "a", "b", uint8(4|0x40), -3.0, 1e-300, 1e300, uint64(0xffff0c), []byte{7, 7, 7, 7, 7, 7}, int64(0), int8(20))
	f.Add("rpc", "s", "m", "x", uint8(5), math.NaN(), math.Inf(1), -1.0, uint64(2), []byte{1}, int64(0), int8(-10))
	f.Add("", "{x}/s", ":bad", "", uint8(1|0x80), math.MaxFloat64, -math.MaxFloat64, 1e-320, uint64(1<<63), []byte{255, 0, 255}, int64(3*time.Hour), int8(127))
	f.Add("n\x00é", "ns", "größe", "日本", uint8(3|0x20), 1e-200, -2.0, 3.0, uint64(15), []byte{3, 1, 4, 1, 5, 9, 2, 6}, int64(-15*24*time.Hour), int8(-128))
	f.Add("sizes", "By", "a", "b", uint8(4|0x10|0x40), 1.0, 2.0, 3.0, uint64(0x7fffffff00), []byte{1, 1, 1}, int64(0), int8(20))

	server := cloudwatchtest.New()
	client := cloudwatch.New(cloudwatch.Options{
		Region:       "eu-west-1",
		BaseEndpoint: aws.String("http://cloudwatch.invalid"),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
		Retryer:      aws.NopRetryer{},
		HTTPClient:   inProcess{server},
	})
	putter := send.NewPutter(client)
	cfg := testConfig()
	tl := translate.NewTranslator(translatorConfig(cfg))

	f.Fuzz(func(t *testing.T, name, unit, key, value string, kind uint8, a, b, c float64, n uint64, raw []byte, tsOffset int64, scale int8) {
		if len(raw) > 400 {
			raw = raw[:400]
		}
		p := fuzzPoint{name, unit, key, value, kind, a, b, c, n, raw, tsOffset, scale}
		now := time.Now()
		conv := delta.NewConverter(cfg.CumulativeState.trackerConfig())
		for step := 0; step < 3; step++ {
			md := p.build(now, step)
			var dropped translate.DropCounts
			convertInto(conv, md, now, &dropped)
			var tr translate.Translation
			tl.Translate(md, now, &tr)
			packed, reqs := tr.Datums, translate.Pack(tr.Datums, cfg.Namespace, nil)
			server.Reset()
			for _, r := range reqs {
				if r.Bytes > translate.MaxRequestBytes || r.N > translate.MaxDatumsPerRequest {
					t.Fatalf("request over the limits: %d datums, %d bytes", r.N, r.Bytes)
				}
				ds := packed[r.First : r.First+r.N]
				if got, want := translate.AppendPutMetricData(nil, cfg.Namespace, ds), sdkRequest(t, cfg.Namespace, ds).body; !bytes.Equal(got, want) {
					t.Fatalf("step %d of %+v: the body differs from the SDK's:\n got %x\nwant %x", step, p, got, want)
				}
				if err := putter.Put(context.Background(), cfg.Namespace, ds); err != nil {
					t.Fatalf("CloudWatch would reject step %d of %+v: %v", step, p, err)
				}
			}
			for i, got := range server.Requests() {
				if got.BodyBytes != reqs[i].Bytes {
					t.Fatalf("size estimate %d, body %d", reqs[i].Bytes, got.BodyBytes)
				}
			}
		}
	})
}
