// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cumulative

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/storagetest"
)

// fuzzKinds are one series of every kind the tracker keeps, at the series
// keys of the fixtures, stamped minute minutes after testNow, their totals
// growing with it.
func fuzzKinds(minute int) []pmetric.Metrics {
	ts := time.Duration(minute) * time.Minute
	n := uint64(minute)
	return []pmetric.Metrics{
		cumulativeSum(at(-time.Hour), at(ts), int64(20*n), map[string]string{"s": "b"}),
		cumulativeSum(at(-time.Hour), at(ts), int64(30*n), map[string]string{"s": "evicted"}),
		histogramWithMinMax(ts, []uint64{1 * n, 4 * n, 2 * n}, 30*float64(n), 0.5, 14),
		doubleSum(ts, 4*float64(n)),
		exponential(ts, 2*n, []uint64{1 * n, 3 * n, 1 * n}, 7*n, 50*float64(n)),
		summary(ts, 14*n, 7*float64(n)),
	}
}

// fuzzStates are the entries the fuzzer damages: the format-1 fixtures and
// the same series as this version saves them.
func fuzzStates(f *testing.F) []map[string][]byte {
	v1 := readFixture(f, formatOneFixture)
	for k, v := range readFixture(f, formatOneKindsFixture) {
		v1[k] = v
	}
	client := storagetest.NewClient(nil)
	c, _ := newObserved(testConfig)
	c.Attach(context.Background(), client, testNow)
	for minute := 1; minute <= 2; minute++ {
		for _, md := range fuzzKinds(minute) {
			var r Result
			c.Convert(context.Background(), md, testNow.Add(time.Duration(minute)*time.Minute), &r)
			if err := c.Save(context.Background(), r.Records); err != nil {
				f.Fatal(err)
			}
		}
	}
	return []map[string][]byte{v1, client.Data()}
}

// A saved state is read back from disk, where anything can have happened
// to it. Whatever one entry holds, restoring it neither crashes nor makes a
// series send more than its total since its start, and from the second
// point on every series sends exactly its increase.
func FuzzRestoredState(f *testing.F) {
	states := fuzzStates(f)
	for i, st := range states {
		for j, k := range slices.Sorted(maps.Keys(st)) {
			f.Add(uint8(i), uint8(j), st[k])
		}
	}
	f.Add(uint8(0), uint8(0), []byte{})
	f.Add(uint8(1), uint8(0), []byte{stateFormat})

	f.Fuzz(func(t *testing.T, state, entry uint8, value []byte) {
		st := states[int(state)%len(states)]
		keys := slices.Sorted(maps.Keys(st))
		data := make(map[string][]byte, len(st))
		for k, v := range st {
			data[k] = slices.Clone(v)
		}
		data[keys[int(entry)%len(keys)]] = value

		c, _ := newObserved(testConfig)
		c.Attach(context.Background(), storagetest.NewClient(data), testNow.Add(5*time.Minute))
		// The points come later than any saved point can be (FutureTolerance
		// past the restart), sooner than the TTL forgets the series.
		const first, second = 20, 21
		for i, md := range fuzzKinds(first) {
			var r Result
			c.Convert(context.Background(), md, testNow.Add(first*time.Minute), &r)
			assertWithinTotal(t, md, fuzzKinds(first)[i])
		}
		// The second point of each series moves on from the first.
		for i, md := range fuzzKinds(second) {
			var r Result
			c.Convert(context.Background(), md, testNow.Add(second*time.Minute), &r)
			assertIncrease(t, md, fuzzKinds(second)[i], fuzzKinds(first)[i])
		}
	})
}

// assertWithinTotal: each point of out (converted from in) is between
// nothing and in's total.
func assertWithinTotal(t *testing.T, out, in pmetric.Metrics) {
	t.Helper()
	m, mi := onlyMetric(out), onlyMetric(in)
	switch mi.Type() {
	case pmetric.MetricTypeSum:
		if m.Sum().DataPoints().Len() == 0 {
			return
		}
		got, total := m.Sum().DataPoints().At(0), mi.Sum().DataPoints().At(0)
		if got.IntValue() < 0 || got.IntValue() > total.IntValue() ||
			!(got.DoubleValue() >= 0 && got.DoubleValue() <= total.DoubleValue()) {
			t.Fatalf("%s: sent %d/%g of a total of %d/%g", m.Name(), got.IntValue(), got.DoubleValue(), total.IntValue(), total.DoubleValue())
		}
	case pmetric.MetricTypeHistogram:
		if m.Histogram().DataPoints().Len() == 0 {
			return
		}
		got, total := m.Histogram().DataPoints().At(0), mi.Histogram().DataPoints().At(0)
		assertCountsWithin(t, m.Name(), got.Count(), got.BucketCounts().AsRaw(), total.Count(), total.BucketCounts().AsRaw())
	case pmetric.MetricTypeExponentialHistogram:
		if m.ExponentialHistogram().DataPoints().Len() == 0 {
			return
		}
		// Buckets of another scale are merged to subtract: compare totals.
		got, total := m.ExponentialHistogram().DataPoints().At(0), mi.ExponentialHistogram().DataPoints().At(0)
		inBuckets := got.ZeroCount()
		for _, b := range got.Positive().BucketCounts().All() {
			inBuckets += b
		}
		assertCountsWithin(t, m.Name(), max(got.Count(), inBuckets), nil, total.Count(), nil)
	case pmetric.MetricTypeSummary: // sent as a histogram of its count and sum
		if m.Type() != pmetric.MetricTypeHistogram || m.Histogram().DataPoints().Len() == 0 {
			return
		}
		got, total := m.Histogram().DataPoints().At(0), mi.Summary().DataPoints().At(0)
		assertCountsWithin(t, m.Name(), got.Count(), nil, total.Count(), nil)
	}
}

func assertCountsWithin(t *testing.T, name string, count uint64, buckets []uint64, total uint64, totalBuckets []uint64) {
	t.Helper()
	if count > total || len(buckets) > len(totalBuckets) {
		t.Fatalf("%s: sent a count of %d, buckets %v, of a total of %d, %v", name, count, buckets, total, totalBuckets)
	}
	for i, b := range buckets {
		if b > totalBuckets[i] {
			t.Fatalf("%s: sent buckets %v of a total of %v", name, buckets, totalBuckets)
		}
	}
}

// assertIncrease: out, converted from in, sends exactly in less prev.
func assertIncrease(t *testing.T, out, in, prev pmetric.Metrics) {
	t.Helper()
	m, mi, mp := onlyMetric(out), onlyMetric(in), onlyMetric(prev)
	var got, want []float64
	switch mi.Type() {
	case pmetric.MetricTypeSum:
		if m.Sum().DataPoints().Len() == 1 {
			p := m.Sum().DataPoints().At(0)
			got = []float64{float64(p.IntValue()) + p.DoubleValue()}
		}
		a, b := mi.Sum().DataPoints().At(0), mp.Sum().DataPoints().At(0)
		want = []float64{float64(a.IntValue()-b.IntValue()) + a.DoubleValue() - b.DoubleValue()}
	case pmetric.MetricTypeHistogram:
		if m.Histogram().DataPoints().Len() == 1 {
			got = histogramFigures(m.Histogram().DataPoints().At(0))
		}
		want = subtract(histogramFigures(mi.Histogram().DataPoints().At(0)), histogramFigures(mp.Histogram().DataPoints().At(0)))
	case pmetric.MetricTypeExponentialHistogram:
		if m.ExponentialHistogram().DataPoints().Len() == 1 {
			got = exponentialFigures(m.ExponentialHistogram().DataPoints().At(0))
		}
		want = subtract(exponentialFigures(mi.ExponentialHistogram().DataPoints().At(0)), exponentialFigures(mp.ExponentialHistogram().DataPoints().At(0)))
	case pmetric.MetricTypeSummary:
		if m.Type() == pmetric.MetricTypeHistogram && m.Histogram().DataPoints().Len() == 1 {
			p := m.Histogram().DataPoints().At(0)
			got = []float64{float64(p.Count()), p.Sum()}
		}
		a, b := mi.Summary().DataPoints().At(0), mp.Summary().DataPoints().At(0)
		want = []float64{float64(a.Count() - b.Count()), a.Sum() - b.Sum()}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s: second point sent %v, want the increase %v", mi.Name(), got, want)
	}
}

func histogramFigures(p pmetric.HistogramDataPoint) []float64 {
	out := []float64{float64(p.Count()), p.Sum()}
	for _, b := range p.BucketCounts().All() {
		out = append(out, float64(b))
	}
	return out
}

func exponentialFigures(p pmetric.ExponentialHistogramDataPoint) []float64 {
	out := []float64{float64(p.Count()), p.Sum(), float64(p.ZeroCount())}
	for _, b := range p.Positive().BucketCounts().All() {
		out = append(out, float64(b))
	}
	return out
}

func subtract(a, b []float64) []float64 {
	out := make([]float64, len(a))
	for i := range a {
		out[i] = a[i] - b[i]
	}
	return out
}

func onlyMetric(md pmetric.Metrics) pmetric.Metric {
	return md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0)
}

// The points themselves come from the service's SDK, not ours to trust:
// two cumulative points of an exponential histogram at any scales, offsets
// and buckets (OTLP allows offsets across the whole int32 range), then two
// of an explicit histogram whose bounds and buckets need not agree. The
// tracker never crashes and never sends more than the later point's total.
func FuzzConvertedPoints(f *testing.F) {
	f.Add(int32(2), int32(3), []byte{1, 2}, int32(2), int32(3), []byte{1, 3, 1}, []byte{1, 10}, []byte{1, 2, 0}, []byte{1, 3, 2})
	f.Add(int32(20), int32(1<<31-1), []byte{1, 1}, int32(-10), int32(-1<<31), []byte{2, 2, 2}, []byte{}, []byte{5}, []byte{7, 1})
	f.Add(int32(-10), int32(0), []byte{}, int32(0), int32(-5), []byte{9}, []byte{3, 1}, []byte{1, 1, 1}, []byte{1})

	f.Fuzz(func(t *testing.T, scale1, offset1 int32, buckets1 []byte, scale2, offset2 int32, buckets2 []byte,
		bounds, counts1, counts2 []byte) {
		c, _ := newObserved(testConfig)
		expo := func(minute int, scale, offset int32, buckets []byte) pmetric.Metrics {
			counts := make([]uint64, len(buckets))
			var n uint64
			for i, b := range buckets {
				counts[i] = uint64(b)
				n += uint64(b)
			}
			md := exponential(time.Duration(minute)*time.Minute, 0, counts, n, 0)
			dp := onlyMetric(md).ExponentialHistogram().DataPoints().At(0)
			dp.SetScale(scale)
			dp.Positive().SetOffset(offset)
			dp.Negative().SetOffset(offset)
			dp.Negative().BucketCounts().FromRaw(counts)
			dp.SetCount(2 * n)
			return md
		}
		explicit := func(minute int, counts []byte) pmetric.Metrics {
			b := make([]float64, len(bounds))
			for i, v := range bounds {
				b[i] = float64(v)
			}
			cs := make([]uint64, len(counts))
			for i, v := range counts {
				cs[i] = uint64(v)
			}
			return cumulativeHistogram(at(-time.Hour), at(time.Duration(minute)*time.Minute), b, cs, 1)
		}
		for i, md := range []pmetric.Metrics{
			expo(1, scale1, offset1, buckets1), expo(2, scale2, offset2, buckets2),
			explicit(1, counts1), explicit(2, counts2),
		} {
			in := pmetric.NewMetrics()
			md.CopyTo(in)
			var r Result
			c.Convert(context.Background(), md, testNow.Add(3*time.Minute), &r)
			if i%2 == 1 {
				assertWithinTotal(t, md, in)
			}
		}
	})
}
