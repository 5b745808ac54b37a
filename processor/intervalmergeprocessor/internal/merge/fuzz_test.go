// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package merge

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// fuzzRequest builds one worker's request from four bytes: the worker,
// the kind of metric (summable or not, and shapes that conflict under one
// name), an attribute value and the value.
func fuzzRequest(b [4]byte) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "build")
	rm.Resource().Attributes().PutStr("service.instance.id", string('a'+rune(b[0]%4)))
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	v := int64(b[3])
	attr := string('x' + rune(b[2]%3))
	sum := func(name, unit string, temporality pmetric.AggregationTemporality, double bool) {
		m.SetName(name)
		m.SetUnit(unit)
		s := m.SetEmptySum()
		s.SetIsMonotonic(true)
		s.SetAggregationTemporality(temporality)
		dp := s.DataPoints().AppendEmpty()
		dp.Attributes().PutStr("k", attr)
		dp.SetStartTimestamp(100)
		dp.SetTimestamp(pcommon.Timestamp(200 + 10*int(b[1]%5))) // requests of one interval, out of order
		if double {
			dp.SetDoubleValue(float64(v) / 4)
		} else {
			dp.SetIntValue(v)
		}
	}
	histogram := func(bounds []float64) {
		m.SetName("h")
		m.SetUnit("s")
		h := m.SetEmptyHistogram()
		h.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
		dp := h.DataPoints().AppendEmpty()
		dp.Attributes().PutStr("k", attr)
		dp.ExplicitBounds().FromRaw(bounds)
		counts := make([]uint64, len(bounds)+1)
		counts[int(b[3])%len(counts)] = uint64(b[3])
		dp.BucketCounts().FromRaw(counts)
		dp.SetCount(uint64(b[3]))
		dp.SetSum(float64(v))
	}
	switch b[1] % 8 {
	case 0:
		sum("c", "1", pmetric.AggregationTemporalityDelta, false)
	case 1:
		sum("c", "1", pmetric.AggregationTemporalityDelta, true) // a double under the int's name
	case 2:
		sum("c", "s", pmetric.AggregationTemporalityDelta, false) // another unit
	case 3:
		sum("c", "1", pmetric.AggregationTemporalityCumulative, false) // not summable
	case 4:
		histogram([]float64{1, 10})
	case 5:
		histogram([]float64{5}) // another layout
	case 6:
		m.SetName("c") // a gauge under the sum's name
		dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
		dp.Attributes().PutStr("k", attr)
		dp.SetIntValue(v)
	default:
		histogram(nil) // no bounds: one bucket
	}
	return md
}

// totals adds up, per metric name, every number value (an int and a
// double of one series add up to a double) and every histogram count and
// bucket count in md.
type totals struct {
	numbers         float64
	count, inBucket uint64
}

func totalsOf(md pmetric.Metrics) map[string]totals {
	out := map[string]totals{}
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		sms := md.ResourceMetrics().At(i).ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				t := out[m.Name()]
				numbers := pmetric.NewNumberDataPointSlice()
				switch m.Type() {
				case pmetric.MetricTypeSum:
					numbers = m.Sum().DataPoints()
				case pmetric.MetricTypeGauge:
					numbers = m.Gauge().DataPoints()
				case pmetric.MetricTypeHistogram:
					for _, dp := range m.Histogram().DataPoints().All() {
						t.count += dp.Count()
						for _, c := range dp.BucketCounts().All() {
							t.inBucket += c
						}
					}
				}
				for _, dp := range numbers.All() {
					t.numbers += float64(dp.IntValue()) + dp.DoubleValue()
				}
				out[m.Name()] = t
			}
		}
	}
	return out
}

// Whatever workers send within an interval, merging only adds up: per
// metric name, the totals of every value, count and bucket leave as they
// came, and nothing crashes.
func FuzzMergeKeepsTotals(f *testing.F) {
	f.Add([]byte{0, 0, 0, 3, 1, 0, 0, 4, 0, 4, 1, 2, 1, 4, 1, 7})
	f.Add([]byte{0, 1, 0, 8, 1, 2, 0, 1, 2, 3, 1, 1, 3, 5, 2, 9, 0, 6, 0, 5, 1, 7, 2, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		iv := New(opts)
		in := pmetric.NewMetrics()
		for i := 0; i+4 <= len(data) && i < 4*64; i += 4 {
			md := fuzzRequest([4]byte(data[i : i+4]))
			for j := 0; j < md.ResourceMetrics().Len(); j++ {
				md.ResourceMetrics().At(j).CopyTo(in.ResourceMetrics().AppendEmpty())
			}
			iv.Add(md)
		}
		want, got := totalsOf(in), totalsOf(iv.Metrics())
		if len(want) != len(got) {
			t.Fatalf("metrics %v, want %v", got, want)
		}
		for name, w := range want {
			if got[name] != w {
				t.Fatalf("%s: %+v, want %+v", name, got[name], w)
			}
		}
	})
}
