// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cumulative

import (
	"bufio"
	"context"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/storagetest"
)

// readFixture reads a state fixture: one "storage-key hex-value" a line, the
// keys as the file_storage client of the CloudWatch exporter wrote them.
func readFixture(t testing.TB, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	data := map[string][]byte{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, value, ok := strings.Cut(line, " ")
		require.True(t, ok, line)
		_, key, ok = strings.Cut(key, "cumulative_state/")
		require.True(t, ok, line)
		b, err := hex.DecodeString(value)
		require.NoError(t, err)
		data[key] = b
	}
	require.NoError(t, sc.Err())
	return data
}

const formatOneFixture = "testdata/state_v1.txt"

func histogramWithMinMax(ts time.Duration, counts []uint64, sum, minV, maxV float64) pmetric.Metrics {
	md := cumulativeHistogram(at(-time.Hour), at(ts), []float64{1, 10}, counts, sum)
	dp := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Histogram().DataPoints().At(0)
	dp.SetMin(minV)
	dp.SetMax(maxV)
	return md
}

// The fixture was written by the exporter before this package existed:
// series "s=b" at 8 (5 before), a latency histogram, series "s=evicted" at
// 3, and a watermark at 12:00:00 left by forgetting "s=a" (last value 10).
// This version restores it and goes on from it: no series sends its total
// again, none loses an increment. What it saved meanwhile, in format 2,
// is read back by the next restart.
func TestUpgradeFromFormatOne(t *testing.T) {
	client := storagetest.NewClient(readFixture(t, formatOneFixture))
	assertGoesOnFromFixtureState(t, client)

	c, _ := newObserved(testConfig)
	now := testNow.Add(3 * time.Minute)
	load := c.Attach(context.Background(), client, now)
	assert.Equal(t, Load{Restored: 5, Listed: true}, load)
	assertEntriesInFormat(t, client, stateFormat)
	md := cumulativeSum(at(-time.Hour), at(3*time.Minute), 20, map[string]string{"s": "b"})
	convert(t, c, md, now)
	v, _ := sentSum(t, md)
	assert.Equal(t, int64(8), v, "20 - 12, saved in format 2")
	md = histogramWithMinMax(2*time.Minute, []uint64{1, 4, 2}, 30, 0.5, 14)
	convert(t, c, md, now)
	dp := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Histogram().DataPoints().At(0)
	assert.Equal(t, []uint64{0, 1, 1}, dp.BucketCounts().AsRaw(), "[1 4 2] - [1 3 1], bounds from the layout entry")
	assert.Equal(t, 10.0, dp.Sum())
}

// assertEntriesInFormat checks that every series and layout entry in
// client starts with format (the watermark entry is the same in both).
func assertEntriesInFormat(t *testing.T, client *storagetest.Client, format byte) {
	t.Helper()
	for k, v := range client.Data() {
		if k == WatermarkKey {
			continue
		}
		require.NotEmpty(t, v, k)
		assert.Equal(t, format, v[0], k)
	}
}

// assertGoesOnFromFixtureState attaches a tracker to client, which holds
// the state of formatOneFixture (in any format), and checks that every
// series goes on from it.
func assertGoesOnFromFixtureState(t *testing.T, client *storagetest.Client) {
	t.Helper()
	c, _ := newObserved(testConfig)
	now := testNow.Add(2 * time.Minute)
	load := c.Attach(context.Background(), client, now)
	assert.Equal(t, Load{Restored: 3, Listed: true}, load)

	md := cumulativeSum(at(-time.Hour), at(time.Minute), 12, map[string]string{"s": "b"})
	convert(t, c, md, now)
	v, sent := sentSum(t, md)
	require.True(t, sent)
	assert.Equal(t, int64(4), v, "12 - 8")

	md = cumulativeSum(at(-time.Hour), at(time.Minute), 7, map[string]string{"s": "evicted"})
	convert(t, c, md, now)
	v, _ = sentSum(t, md)
	assert.Equal(t, int64(4), v, "7 - 3")

	md = histogramWithMinMax(time.Minute, []uint64{1, 3, 1}, 20, 0.5, 12)
	convert(t, c, md, now)
	dp := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Histogram().DataPoints().At(0)
	assert.Equal(t, []uint64{0, 1, 1}, dp.BucketCounts().AsRaw())
	assert.Equal(t, uint64(2), dp.Count())
	assert.Equal(t, 11.0, dp.Sum())
	assert.False(t, dp.HasMin(), "the minimum did not change in the interval")
	assert.Equal(t, 12.0, dp.Max())

	// Forgotten before the upgrade and started before the watermark: it may
	// have been sent, so it is a baseline, then goes on.
	md = cumulativeSum(at(-time.Hour), at(time.Minute), 15, map[string]string{"s": "a"})
	r := convert(t, c, md, now)
	_, sent = sentSum(t, md)
	assert.False(t, sent, "never its whole total again")
	assert.Equal(t, 1, r.Dropped[ReasonBaseline])
	md = cumulativeSum(at(-time.Hour), at(2*time.Minute), 18, map[string]string{"s": "a"})
	convert(t, c, md, now)
	v, _ = sentSum(t, md)
	assert.Equal(t, int64(3), v)

	// Started after the watermark: new for sure, counted from its start.
	md = cumulativeSum(at(30*time.Second), at(time.Minute), 6, map[string]string{"s": "new"})
	convert(t, c, md, now)
	v, _ = sentSum(t, md)
	assert.Equal(t, int64(6), v)
}

// The same conversions as the ones that produced the format-1 fixture,
// saved by this version: format 2, the histogram's bounds in one layout
// entry, and a restart goes on from it as from the fixture.
func TestFormatTwoIsWhatThisVersionWrites(t *testing.T) {
	client := storagetest.NewClient(nil)
	c, _ := newObserved(testConfig)
	c.Attach(context.Background(), client, testNow)
	convert(t, c, cumulativeSum(at(-time.Hour), at(0), 10, map[string]string{"s": "a"}), testNow)
	convert(t, c, cumulativeSum(at(-time.Hour), at(0), 5, map[string]string{"s": "b"}), testNow)
	convert(t, c, cumulativeSum(at(-time.Hour), at(time.Second), 8, map[string]string{"s": "b"}), testNow)
	convert(t, c, histogramWithMinMax(0, []uint64{1, 2, 0}, 9, 0.5, 7), testNow)
	cfg := testConfig
	cfg.MaxSeries = 3
	c2, _ := newObserved(cfg)
	c2.Attach(context.Background(), client, testNow)
	convert(t, c2, cumulativeSum(at(-time.Hour), at(2*time.Second), 3, map[string]string{"s": "evicted"}), testNow)

	fixture := readFixture(t, formatOneFixture)
	data := client.Data()
	assertEntriesInFormat(t, client, stateFormat)
	var layoutKeys []string
	for k := range data {
		switch {
		case strings.HasPrefix(k, LayoutKeyPrefix):
			layoutKeys = append(layoutKeys, k)
		case k == WatermarkKey:
			assert.Equal(t, fixture[k][1:], data[k][1:], "the watermark entry is the same but for its format byte")
		default:
			assert.Contains(t, fixture, k, "the same keys as format 1")
			assert.Less(t, len(data[k]), len(fixture[k]), "%s: smaller than in format 1", k)
		}
	}
	assert.Equal(t, []string{layoutStorageKey(hashBounds([]float64{1, 10}))}, layoutKeys)
	assert.Len(t, data, len(fixture)+1)
	assertGoesOnFromFixtureState(t, client)
}

// A damaged entry is skipped with a counted read error, never a crash, and
// never a double count: its series is unknown, so its next point is a
// baseline rather than its whole total, and the point after is a delta.
func TestDamagedEntriesAreBaselines(t *testing.T) {
	fixture := readFixture(t, formatOneFixture)
	const key = "series/ee372d39c4de8f15" // s=b, at 8
	require.Contains(t, fixture, key)
	for name, damage := range map[string]func([]byte) []byte{
		"truncated":       func(b []byte) []byte { return b[:len(b)/2] },
		"empty":           func([]byte) []byte { return []byte{} },
		"unknown version": func(b []byte) []byte { return append([]byte{99}, b[1:]...) },
		"trailing bytes":  func(b []byte) []byte { return append(b, 1, 2, 3) },
		"wrong kind":      func(b []byte) []byte { b[1] = 9; return b },
		// Decodes, but a delta from a negative total would exceed the
		// series' total (a sum here is always monotonic).
		"negative total": func(b []byte) []byte {
			var s series
			require.NoError(t, decodeSeriesState(b, &s, nil))
			s.cur.setIntValue(-100)
			return appendSeriesState(nil, &s, 0, false)
		},
	} {
		t.Run(name, func(t *testing.T) {
			data := readFixture(t, formatOneFixture)
			data[key] = damage(data[key])
			c, _ := newObserved(testConfig)
			now := testNow.Add(2 * time.Minute)
			load := c.Attach(context.Background(), storagetest.NewClient(data), now)
			assert.Equal(t, int64(1), load.ReadErrors)
			assert.Equal(t, 3, load.Restored, "two restored, the damaged one kept as unknown")

			md := cumulativeSum(at(-time.Hour), at(time.Minute), 12, map[string]string{"s": "b"})
			r := convert(t, c, md, now)
			_, sent := sentSum(t, md)
			assert.False(t, sent, "not its total of 12 again")
			assert.Equal(t, 1, r.Dropped[ReasonBaseline])
			md = cumulativeSum(at(-time.Hour), at(2*time.Minute), 20, map[string]string{"s": "b"})
			convert(t, c, md, now)
			v, _ := sentSum(t, md)
			assert.Equal(t, int64(8), v)

			md = cumulativeSum(at(-time.Hour), at(time.Minute), 7, map[string]string{"s": "evicted"})
			convert(t, c, md, now)
			v, _ = sentSum(t, md)
			assert.Equal(t, int64(4), v, "a neighbour is unaffected")
		})
	}
}

// An entry of another kind under a series' key decodes (the kind to expect
// is known only when a point comes: a metric's type is part of its key), but
// cannot be subtracted from: the point is a baseline, counted as a read
// error, and the series goes on from it. Before, a histogram's point on a
// sum's entry crashed the collector.
func TestEntryOfAnotherKindIsABaseline(t *testing.T) {
	fixture := readFixture(t, formatOneFixture)
	const sumKey, histogramKey = "series/ee372d39c4de8f15", "series/47f4c22319feaca9" // s=b; latency
	require.Contains(t, fixture, sumKey)
	require.Contains(t, fixture, histogramKey)
	for name, tc := range map[string]struct {
		key, from string
		points    func(minute int) pmetric.Metrics
		sent      func(t *testing.T, md pmetric.Metrics) (uint64, bool)
	}{
		"a sum on a histogram's entry": {
			key: sumKey, from: histogramKey,
			points: func(minute int) pmetric.Metrics {
				return cumulativeSum(at(-time.Hour), at(time.Duration(minute)*time.Minute), int64(10*minute), map[string]string{"s": "b"})
			},
			sent: func(t *testing.T, md pmetric.Metrics) (uint64, bool) {
				v, ok := sentSum(t, md)
				return uint64(v), ok
			},
		},
		"a histogram on a sum's entry": {
			key: histogramKey, from: sumKey,
			points: func(minute int) pmetric.Metrics {
				n := uint64(minute)
				return histogramWithMinMax(time.Duration(minute)*time.Minute, []uint64{n, 2 * n, n}, 10*float64(n), 0.5, 14)
			},
			sent: func(t *testing.T, md pmetric.Metrics) (uint64, bool) {
				dps := onlyMetric(md).Histogram().DataPoints()
				if dps.Len() == 0 {
					return 0, false
				}
				return dps.At(0).Count(), true
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			data := readFixture(t, formatOneFixture)
			data[tc.key] = data[tc.from]
			c, _ := newObserved(testConfig)
			now := testNow.Add(5 * time.Minute)
			load := c.Attach(context.Background(), storagetest.NewClient(data), now)
			assert.Equal(t, int64(0), load.ReadErrors, "it decodes")

			md := tc.points(3)
			r := convert(t, c, md, now)
			_, sent := tc.sent(t, md)
			assert.False(t, sent, "a baseline: its total may have been sent before")
			assert.Equal(t, int64(1), r.ReadErrors)
			assert.Equal(t, 1, r.Dropped[ReasonBaseline])

			md = tc.points(4)
			r = convert(t, c, md, now)
			v, sent := tc.sent(t, md)
			assert.True(t, sent)
			assert.Equal(t, int64(0), r.ReadErrors)
			want := map[bool]uint64{true: 10, false: 4}[tc.key == sumKey] // 40 - 30; 16 - 12 observations
			assert.Equal(t, want, v, "the increase since the baseline")
		})
	}
}

// A state saved while the clock was ahead (a node that booted with a wrong
// clock, corrected since), or damaged into the future, is beyond what a
// point may be stamped (FutureTolerance past now). Gone on from, every
// point until that time would be older than the series' last and dropped;
// instead each such series is unknown: one baseline, then its increases.
func TestStateSavedAheadOfTheClockIsABaseline(t *testing.T) {
	client := storagetest.NewClient(nil)
	ahead := 2 * time.Hour
	c, _ := newObserved(testConfig)
	c.Attach(context.Background(), client, testNow.Add(ahead))
	convert(t, c, cumulativeSum(at(-time.Hour), at(ahead), 100, map[string]string{"s": "b"}), testNow.Add(ahead))
	convert(t, c, cumulativeSum(at(-time.Hour), at(time.Minute), 7, map[string]string{"s": "near"}), testNow.Add(time.Minute))

	c, _ = newObserved(testConfig)
	now := testNow.Add(2 * time.Minute) // the clock set right
	load := c.Attach(context.Background(), client, now)
	assert.Equal(t, Load{Restored: 2, ReadErrors: 1, Listed: true}, load, "the series ahead is unknown")

	md := cumulativeSum(at(-time.Hour), at(2*time.Minute), 110, map[string]string{"s": "b"})
	r := convert(t, c, md, now)
	_, sent := sentSum(t, md)
	assert.False(t, sent)
	assert.Equal(t, 1, r.Dropped[ReasonBaseline], "not out_of_order until the clock reaches the saved point")
	md = cumulativeSum(at(-time.Hour), at(3*time.Minute), 125, map[string]string{"s": "b"})
	convert(t, c, md, now.Add(time.Minute))
	v, _ := sentSum(t, md)
	assert.Equal(t, int64(15), v)

	md = cumulativeSum(at(-time.Hour), at(2*time.Minute), 9, map[string]string{"s": "near"})
	convert(t, c, md, now)
	v, _ = sentSum(t, md)
	assert.Equal(t, int64(2), v, "a series saved within the tolerance goes on")
}

const formatOneKindsFixture = "testdata/state_v1_kinds.txt"

func doubleSum(ts time.Duration, v float64) pmetric.Metrics {
	md := pmetric.NewMetrics()
	s := newMetric(md, "energy", "J").SetEmptySum()
	s.SetIsMonotonic(true)
	s.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	dp := s.DataPoints().AppendEmpty()
	dp.SetStartTimestamp(at(-time.Hour))
	dp.SetTimestamp(at(ts))
	dp.SetDoubleValue(v)
	return md
}

func exponential(ts time.Duration, zero uint64, counts []uint64, count uint64, sum float64) pmetric.Metrics {
	md := pmetric.NewMetrics()
	e := newMetric(md, "size", "By").SetEmptyExponentialHistogram()
	e.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	dp := e.DataPoints().AppendEmpty()
	dp.SetStartTimestamp(at(-time.Hour))
	dp.SetTimestamp(at(ts))
	dp.SetScale(2)
	dp.SetZeroCount(zero)
	dp.Positive().SetOffset(3)
	dp.Positive().BucketCounts().FromRaw(counts)
	dp.SetCount(count)
	dp.SetSum(sum)
	return md
}

func summary(ts time.Duration, count uint64, sum float64) pmetric.Metrics {
	md := pmetric.NewMetrics()
	dp := newMetric(md, "rpc", "s").SetEmptySummary().DataPoints().AppendEmpty()
	dp.SetStartTimestamp(at(-time.Hour))
	dp.SetTimestamp(at(ts))
	dp.SetCount(count)
	dp.SetSum(sum)
	return md
}

// The other kinds as the earlier exporter saved them: a double sum at 2.5,
// an exponential histogram (zero 1, buckets 3..4 = [1 2]) and a summary
// (count 10, sum 5). Each goes on with a delta from the saved point.
func TestUpgradeFromFormatOneEveryKind(t *testing.T) {
	assertEveryKindGoesOn(t, storagetest.NewClient(readFixture(t, formatOneKindsFixture)))
}

func assertEveryKindGoesOn(t *testing.T, client *storagetest.Client) {
	t.Helper()
	c, _ := newObserved(testConfig)
	now := testNow.Add(2 * time.Minute)
	load := c.Attach(context.Background(), client, now)
	assert.Equal(t, Load{Restored: 3, Listed: true}, load)

	md := doubleSum(time.Minute, 4)
	convert(t, c, md, now)
	dps := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints()
	require.Equal(t, 1, dps.Len())
	assert.Equal(t, 1.5, dps.At(0).DoubleValue())

	md = exponential(time.Minute, 2, []uint64{1, 3, 1}, 7, 50)
	convert(t, c, md, now)
	edps := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).ExponentialHistogram().DataPoints()
	require.Equal(t, 1, edps.Len())
	e := edps.At(0)
	assert.Equal(t, uint64(1), e.ZeroCount())
	assert.Equal(t, int32(3), e.Positive().Offset())
	assert.Equal(t, []uint64{0, 1, 1}, e.Positive().BucketCounts().AsRaw())
	assert.Equal(t, uint64(3), e.Count())
	assert.Equal(t, 20.0, e.Sum())

	md = summary(time.Minute, 14, 7)
	convert(t, c, md, now)
	hdps := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Histogram().DataPoints()
	require.Equal(t, 1, hdps.Len())
	assert.Equal(t, uint64(4), hdps.At(0).Count())
	assert.Equal(t, 2.0, hdps.At(0).Sum())
}

// The same points saved by this version (format 2) are restored alike.
func TestEveryKindSurvivesARestartInFormatTwo(t *testing.T) {
	client := storagetest.NewClient(nil)
	c, _ := newObserved(testConfig)
	c.Attach(context.Background(), client, testNow)
	convert(t, c, doubleSum(0, 2.5), testNow)
	convert(t, c, exponential(0, 1, []uint64{1, 2}, 4, 30), testNow)
	convert(t, c, summary(0, 10, 5), testNow)
	fixture := readFixture(t, formatOneKindsFixture)
	assert.Len(t, client.Data(), len(fixture))
	assertEntriesInFormat(t, client, stateFormat)
	assertEveryKindGoesOn(t, client)
}
