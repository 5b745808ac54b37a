// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/buildsim"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
)

// Derived metric names and their CloudWatch units (the buildjob contract and
// the exporter's UCUM mapping: {job} and the like are counts, s is Seconds).
const (
	mJobs          = "build.jobs"
	mJobDuration   = "build.job.duration"
	mJobsActive    = "build.jobs.active"
	mStageRuns     = "build.stage.runs"
	mStageDuration = "build.stage.duration"
	mAPIRequests   = "api.requests"
	mAPIDuration   = "api.request.duration"
)

// dstat is what a set of datums says: Sum of the values (a counter's total),
// and the statistics CloudWatch computes (count, sum, min, max).
type dstat struct {
	Datums     int
	Count, Sum float64
	Min, Max   float64
	Units      map[string]int
	Negative   int // datums with a negative value
}

func hasDims(d cloudwatchtest.Datum, want map[string]string) bool {
	for k, v := range want {
		if d.Dimensions[k] != v {
			return false
		}
	}
	return true
}

// aggregate sums the datums of one metric whose dimensions include want.
func aggregate(datums []cloudwatchtest.Datum, name string, want map[string]string) dstat {
	s := dstat{Min: math.Inf(1), Max: math.Inf(-1), Units: map[string]int{}}
	see := func(v float64) {
		s.Min = math.Min(s.Min, v)
		s.Max = math.Max(s.Max, v)
		if v < 0 {
			s.Negative++
		}
	}
	for _, d := range datums {
		if d.MetricName != name || !hasDims(d, want) {
			continue
		}
		s.Datums++
		s.Units[d.Unit]++
		switch {
		case d.Statistics != nil:
			s.Count += d.Statistics.SampleCount
			s.Sum += d.Statistics.Sum
			see(d.Statistics.Minimum)
			see(d.Statistics.Maximum)
		case len(d.Values) > 0:
			for i, v := range d.Values {
				c := 1.0
				if i < len(d.Counts) {
					c = d.Counts[i]
				}
				s.Count += c
				s.Sum += v * c
				see(v)
			}
		case d.Value != nil:
			s.Count++
			s.Sum += *d.Value
			see(*d.Value)
		}
	}
	return s
}

func withDims(a map[string]string, b map[string]string) map[string]string {
	out := maps.Clone(a)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, b)
	return out
}

// mismatches collects the differences between what landed and the truth,
// so that a failure reads as one list rather than one assertion per series.
type mismatches struct {
	t     *testing.T
	lines []string
}

func newMismatches(t *testing.T) *mismatches { return &mismatches{t: t} }

func (m *mismatches) check(ok bool, format string, args ...any) {
	if !ok {
		m.lines = append(m.lines, fmt.Sprintf(format, args...))
	}
}

// report fails the test with the first mismatches, if any.
func (m *mismatches) report(what string) {
	m.t.Helper()
	if len(m.lines) == 0 {
		return
	}
	shown := m.lines
	if len(shown) > 25 {
		shown = shown[:25]
	}
	m.t.Errorf("%s: %d mismatches with the ground truth:\n  %s", what, len(m.lines), strings.Join(shown, "\n  "))
}

func sameUnit(got dstat, unit string) bool {
	return got.Datums == 0 || (len(got.Units) == 1 && got.Units[unit] == got.Datums)
}

// counter: the values of a counter's datums add up to want exactly.
func (m *mismatches) counter(datums []cloudwatchtest.Datum, name string, dims map[string]string, want float64, unit string) {
	got := aggregate(datums, name, dims)
	m.check(got.Sum == want, "%s{%s}: landed %v, want %v", name, dimKey(dims), got.Sum, want)
	m.check(got.Negative == 0, "%s{%s}: %d negative values", name, dimKey(dims), got.Negative)
	m.check(sameUnit(got, unit), "%s: units %v, want %s", name, got.Units, unit)
}

// histogram: count, min and max exact; the sum exact up to float rounding,
// because a Values/Counts datum carries the sum only as sum(value*count)
// over representatives computed by the exporter.
func (m *mismatches) histogram(datums []cloudwatchtest.Datum, name string, dims map[string]string, want buildsim.Stat, unit string) {
	got := aggregate(datums, name, dims)
	k := dimKey(dims)
	m.check(got.Count == float64(want.Count), "%s{%s}: sample count %v, want %v", name, k, got.Count, want.Count)
	if want.Count == 0 || got.Count == 0 {
		return
	}
	m.check(almostEqual(want.Sum, got.Sum), "%s{%s}: sum %v, want %v", name, k, got.Sum, want.Sum)
	m.check(got.Min == want.Min, "%s{%s}: minimum %v, want %v", name, k, got.Min, want.Min)
	m.check(got.Max == want.Max, "%s{%s}: maximum %v, want %v", name, k, got.Max, want.Max)
	m.check(sameUnit(got, unit), "%s: units %v, want %s", name, got.Units, unit)
}

// checkCounter and checkHistogram check one series on their own.
func checkCounter(t *testing.T, datums []cloudwatchtest.Datum, name string, dims map[string]string, want float64, unit string) {
	t.Helper()
	m := newMismatches(t)
	m.counter(datums, name, dims, want, unit)
	m.report(name)
}

func checkHistogram(t *testing.T, datums []cloudwatchtest.Datum, name string, dims map[string]string, want buildsim.Stat, unit string) {
	t.Helper()
	m := newMismatches(t)
	m.histogram(datums, name, dims, want, unit)
	m.report(name)
}

// Bucket bounds of the service's SDK histograms: the Go SDK's default, and
// the HTTP semantic conventions' advice buildsim gives
// http.server.request.duration.
var (
	sdkDefaultBounds   = []float64{0, 5, 10, 25, 50, 75, 100, 250, 500, 750, 1000, 2500, 5000, 7500, 10000}
	httpDurationBounds = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}
)

// cumulativeHistogram checks a histogram the service sends cumulative:
// count exact, sum exact up to rounding. Its minimum and maximum are checked
// to the bucket only: the delta between two cumulative points carries no
// min or max of its own (the cumulative ones may come from an earlier
// interval), so the exporter can only place them within their buckets.
func (m *mismatches) cumulativeHistogram(datums []cloudwatchtest.Datum, name string, dims map[string]string, want buildsim.HistogramTruth, unit string, bounds []float64) {
	got := aggregate(datums, name, dims)
	k := dimKey(dims)
	m.check(got.Count == float64(want.Count), "%s{%s}: sample count %v, want %v", name, k, got.Count, want.Count)
	if want.Count == 0 || got.Count == 0 {
		return
	}
	m.check(almostEqual(want.Sum, got.Sum), "%s{%s}: sum %v, want %v", name, k, got.Sum, want.Sum)
	m.check(bucketOf(bounds, want.Min) == bucketOf(bounds, got.Min), "%s{%s}: minimum %v, want %v (same bucket)", name, k, got.Min, want.Min)
	m.check(bucketOf(bounds, want.Max) == bucketOf(bounds, got.Max), "%s{%s}: maximum %v, want %v (same bucket)", name, k, got.Max, want.Max)
	m.check(sameUnit(got, unit), "%s: units %v, want %s", name, got.Units, unit)
}

// bucketOf is the index of the explicit bucket (upper bound inclusive, as
// OpenTelemetry defines them) holding v.
func bucketOf(bounds []float64, v float64) int {
	for i, b := range bounds {
		if v <= b {
			return i
		}
	}
	return len(bounds)
}

// checkDerived compares every derived series with the ground truth. dims
// are extra dimensions every datum of this run carries (service.name).
// apiFromSpans says where api.requests came from: SERVER spans (the
// connector also derives api.request.duration) or the service's
// http.server.request.duration histograms (the processor derives only the
// counts; the latencies are that histogram, checked with the SDK metrics).
func checkDerived(t *testing.T, datums []cloudwatchtest.Datum, truth buildsim.Totals, dims map[string]string, apiFromSpans bool) {
	t.Helper()
	m := newMismatches(t)
	apiDuration := mAPIDuration
	if !apiFromSpans {
		apiDuration = ""
		m.check(aggregate(datums, mAPIDuration, dims).Datums == 0, "%s landed without API spans", mAPIDuration)
	}
	pairs := []struct {
		series            []buildsim.Series
		counter, duration string
	}{
		{truth.Jobs, mJobs, mJobDuration},
		{truth.StageRuns, mStageRuns, mStageDuration},
		{truth.APIRequests, mAPIRequests, apiDuration},
	}
	for _, p := range pairs {
		var total int64
		for _, s := range p.series {
			d := withDims(s.Attributes, dims)
			m.counter(datums, p.counter, d, float64(s.Count), "Count")
			if p.duration != "" {
				m.histogram(datums, p.duration, d, s.Duration, "Seconds")
			}
			total += s.Count
		}
		// Nothing beyond the truth: no timeouts, no series the truth lacks.
		m.counter(datums, p.counter, dims, float64(total), "Count")
	}
	// Every run ended, so the last active count of each series is zero.
	last := map[string]cloudwatchtest.Datum{}
	for _, d := range datums {
		if d.MetricName != mJobsActive || !hasDims(d, dims) {
			continue
		}
		k := dimKey(d.Dimensions)
		if prev, ok := last[k]; !ok || !d.Timestamp.Before(prev.Timestamp) {
			last[k] = d
		}
	}
	for k, d := range last {
		m.check(d.Value == nil || *d.Value == 0, "%s{%s}: last value %v, want 0", mJobsActive, k, d.Value)
	}
	m.report("derived metrics{" + dimKey(dims) + "}")
}

// checkSDKMetrics compares the service's own SDK metrics with the truth.
func checkSDKMetrics(t *testing.T, datums []cloudwatchtest.Datum, truth buildsim.SDKMetrics, dims map[string]string) {
	t.Helper()
	m := newMismatches(t)
	m.counter(datums, truth.Counter.Name, dims, float64(truth.Counter.Total), "Count")
	m.cumulativeHistogram(datums, truth.Histogram.Name, dims, truth.Histogram, "Bytes", sdkDefaultBounds)
	if hd := truth.HTTPServerDuration; hd.Name != "" {
		m.cumulativeHistogram(datums, hd.Name, dims, hd, "Seconds", httpDurationBounds)
	}

	g := aggregate(datums, truth.Gauge.Name, dims)
	m.check(g.Datums > 0, "%s: no datum landed", truth.Gauge.Name)
	m.check(sameUnit(g, "Percent"), "%s: units %v, want Percent", truth.Gauge.Name, g.Units)
	series := map[string]bool{}
	for _, d := range datums {
		if d.MetricName != truth.Gauge.Name || !hasDims(d, dims) {
			continue
		}
		series[dimKey(d.Dimensions)] = true
		vals := d.Values
		if d.Value != nil {
			vals = append(vals, *d.Value)
		}
		for _, v := range vals {
			m.check(slices.Contains(truth.Gauge.Allowed, v), "%s{%s}: %v, a value the service never reported", truth.Gauge.Name, dimKey(d.Dimensions), v)
		}
	}
	m.check(len(series) == truth.Gauge.Series, "%s: %d series, want %d", truth.Gauge.Name, len(series), truth.Gauge.Series)
	m.report("SDK metrics{" + dimKey(dims) + "}")
}

func dimKey(dims map[string]string) string {
	keys := slices.Sorted(maps.Keys(dims))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + dims[k]
	}
	return strings.Join(parts, ",")
}

// describeDatums summarises what landed, per metric, for failure messages
// and the demo.
func describeDatums(datums []cloudwatchtest.Datum) string {
	byName := map[string][]cloudwatchtest.Datum{}
	for _, d := range datums {
		byName[d.MetricName] = append(byName[d.MetricName], d)
	}
	names := slices.Sorted(maps.Keys(byName))
	var b strings.Builder
	for _, n := range names {
		s := aggregate(byName[n], n, nil)
		fmt.Fprintf(&b, "%-28s datums=%-5d count=%-10g sum=%-14g units=%v\n", n, s.Datums, s.Count, s.Sum, s.Units)
	}
	return b.String()
}

// jobsLanded is the build.jobs total that has arrived for dims.
func jobsLanded(cw *cloudwatchtest.Server, dims map[string]string) float64 {
	return aggregate(cw.Datums(), mJobs, dims).Sum
}

func totalJobs(t buildsim.Totals) float64 {
	var n int64
	for _, s := range t.Jobs {
		n += s.Count
	}
	return float64(n)
}
