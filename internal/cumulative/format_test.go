// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cumulative

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

func TestStateEncodingRoundTrip(t *testing.T) {
	seen := time.Unix(1_750_000_000, 123).UnixNano()
	for _, s := range []*series{
		{kind: sumSeries, seen: seen, cur: intSnapshot(1, 2, -5)},
		{kind: sumSeries, seen: seen, hasPrev: true, cur: doubleSnapshot(1, 3, 2.5), prev: doubleSnapshot(1, 2, 0.1)},
		{kind: histogramSeries, seen: seen, curSent: true, cur: snapshot{
			start: 1, ts: 2, count: 3, sum: 9, histogramPart: &histogramPart{min: -1, hasMin: true, bounds: []float64{1, 10}, counts: []uint64{1, 2, 0}},
		}},
		{kind: histogramSeries, seen: seen, hasPrev: true, // the same bounds, written once
			cur:  snapshot{start: 1, ts: 3, count: 4, sum: 9, histogramPart: &histogramPart{bounds: []float64{1, 10}, counts: []uint64{1, 3, 0}}},
			prev: snapshot{start: 1, ts: 2, count: 3, sum: 8, histogramPart: &histogramPart{bounds: []float64{1, 10}, counts: []uint64{1, 2, 0}}},
		},
		{kind: histogramSeries, seen: seen, hasPrev: true, // other bounds
			cur:  snapshot{start: 1, ts: 3, count: 1, sum: 2, histogramPart: &histogramPart{bounds: []float64{1, 5, 10}, counts: []uint64{0, 1, 0, 0}}},
			prev: snapshot{start: 1, ts: 2, count: 3, sum: 8, histogramPart: &histogramPart{bounds: []float64{1, 10}, counts: []uint64{1, 2, 0}}},
		},
		{kind: exponentialSeries, seen: seen, hasPrev: true,
			cur:  snapshot{start: 1, ts: 3, count: 9, sum: 1, histogramPart: &histogramPart{max: 8, hasMax: true, counts: []uint64{1, 1 << 40}, exponentialPart: &exponentialPart{scale: -2, zeroCount: 1, posOffset: -3, negOffset: 7, neg: []uint64{5}}}},
			prev: snapshot{start: 1, ts: 2, count: 2, sum: 0.5, histogramPart: &histogramPart{exponentialPart: &exponentialPart{scale: 20, posOffset: math32Max}}},
		},
		{kind: summarySeries, seen: seen, cur: snapshot{start: 1, ts: 2, count: 4, sum: 10}},
	} {
		// A histogram's bounds inline, and as a layout entry.
		for _, byLayout := range []bool{false, s.kind == histogramSeries} {
			var bounds []float64
			if s.kind == histogramSeries {
				bounds = s.cur.bounds
			}
			layout := hashBounds(bounds)
			lookup := func(h uint64) ([]float64, bool) { return bounds, h == layout }
			b := appendSeriesState(nil, s, layout, byLayout)
			var got series
			require.NoError(t, decodeSeriesState(b, &got, lookup))
			assert.Equal(t, s.kind, got.kind)
			assert.Equal(t, s.seen, got.seen)
			assert.Equal(t, s.cur, got.cur)
			assert.Equal(t, s.prev, got.prev)
			assert.Equal(t, s.hasPrev, got.hasPrev)
			assert.Equal(t, s.curSent, got.curSent)

			// Every truncation and a trailing byte are errors, never a panic.
			for n := range len(b) {
				assert.Error(t, decodeSeriesState(b[:n], &series{}, lookup), "kind %d truncated to %d", s.kind, n)
			}
			assert.Error(t, decodeSeriesState(append(b, 0), &series{}, lookup))
			if byLayout {
				noLayout := func(uint64) ([]float64, bool) { return nil, false }
				assert.ErrorIs(t, decodeSeriesState(b, &series{}, noLayout), errNoLayout)
			}
		}
	}
}

// Times are written as differences, which wrap: any value, however far
// from the others (a start of 0, a clock far ahead), reads back exactly.
func TestStateTimesReadBackExactlyAtTheExtremes(t *testing.T) {
	for _, times := range [][5]uint64{
		{0, 0, 0, 0, 0},
		{0, math.MaxUint64, 1, math.MaxUint64, 0},
		{math.MaxUint64, 0, math.MaxUint64, 1, 1 << 63},
		{1 << 63, 1<<63 - 1, 5, 1 << 62, math.MaxUint64},
	} {
		s := &series{kind: sumSeries, hasPrev: true, seen: int64(times[4]),
			cur:  doubleSnapshot(pcommon.Timestamp(times[0]), pcommon.Timestamp(times[1]), 1),
			prev: doubleSnapshot(pcommon.Timestamp(times[2]), pcommon.Timestamp(times[3]), 2),
		}
		var got series
		require.NoError(t, decodeSeriesState(appendSeriesState(nil, s, 0, false), &got, nil))
		assert.Equal(t, *s, got, "%v", times)
	}
}

// Format 2, spelled out field by field: a sum series with its previous
// point, and a histogram series whose bounds are a layout entry.
func TestFormatTwoBytes(t *testing.T) {
	const start, ts, prevTS, seen = 1_750_000_000_000_000_000, 1_750_000_060_000_000_000, 1_750_000_050_000_000_000, 1_750_000_060_500_000_000
	s := &series{kind: sumSeries, hasPrev: true, seen: seen,
		cur:  intSnapshot(start, ts, 12),
		prev: intSnapshot(start, prevTS, 8),
	}
	want := []byte{2, 0, flagHasPrev}
	want = binary.AppendUvarint(want, start)
	want = binary.AppendVarint(want, ts-start)      // 60 s after its start
	want = binary.AppendVarint(want, seen-ts)       // seen 0.5 s after its timestamp
	want = binary.AppendVarint(append(want, 1), 12) // an integer, 12
	want = binary.AppendVarint(want, 0)             // the previous point: the same start
	want = binary.AppendVarint(want, prevTS-ts)     // 10 s before
	want = binary.AppendVarint(append(want, 1), 8)  // an integer, 8
	assert.Equal(t, want, appendSeriesState(nil, s, 0, false))
	assert.Len(t, want, 33, "against 51 bytes in format 1")

	bounds := []float64{1, 10}
	layout := hashBounds(bounds)
	h := &series{kind: histogramSeries, hasPrev: true, curSent: true, seen: seen,
		cur:  snapshot{start: start, ts: ts, count: 4, sum: 9, histogramPart: &histogramPart{bounds: bounds, counts: []uint64{1, 3, 0}}},
		prev: snapshot{start: start, ts: prevTS, count: 3, sum: 8, histogramPart: &histogramPart{bounds: bounds, counts: []uint64{1, 2, 0}}},
	}
	want = []byte{2, 1, flagHasPrev | flagCurSent | flagSameBounds | flagLayoutBounds}
	want = binary.AppendUvarint(want, start)
	want = binary.AppendVarint(want, ts-start)
	want = binary.AppendVarint(want, seen-ts)
	want = append(want, 4)                                             // count
	want = binary.LittleEndian.AppendUint64(want, math.Float64bits(9)) // sum
	want = append(want, 0)                                             // no min, no max
	want = binary.LittleEndian.AppendUint64(want, layout)              // the bounds: a layout
	want = append(want, 3, 1, 3, 0)                                    // bucket counts
	want = binary.AppendVarint(want, 0)
	want = binary.AppendVarint(want, prevTS-ts)
	want = append(want, 3)
	want = binary.LittleEndian.AppendUint64(want, math.Float64bits(8))
	want = append(want, 0, 3, 1, 2, 0) // no min, no max; the bounds are the last point's
	assert.Equal(t, want, appendSeriesState(nil, h, layout, true))

	// The layout entry: the format byte and the bounds.
	entry := []byte{2, 2}
	entry = binary.LittleEndian.AppendUint64(entry, math.Float64bits(1))
	entry = binary.LittleEndian.AppendUint64(entry, math.Float64bits(10))
	assert.Equal(t, entry, appendLayout(nil, bounds))
	got, err := decodeLayout(entry, layout)
	require.NoError(t, err)
	assert.Equal(t, bounds, got)
	_, err = decodeLayout(entry, layout+1)
	assert.Error(t, err, "bounds that do not hash to their key are corrupt")
}

const math32Max = 1<<31 - 1

func TestStateHistogramBoundsWrittenOnce(t *testing.T) {
	ten := binary.LittleEndian.AppendUint64(nil, math.Float64bits(10))
	s := &series{kind: histogramSeries, hasPrev: true,
		cur:  snapshot{histogramPart: &histogramPart{bounds: []float64{1, 10}, counts: []uint64{1, 3, 0}}},
		prev: snapshot{histogramPart: &histogramPart{bounds: []float64{1, 10}, counts: []uint64{1, 2, 0}}},
	}
	assert.Equal(t, 1, bytes.Count(appendSeriesState(nil, s, 0, false), ten))
	assert.Equal(t, 0, bytes.Count(appendSeriesState(nil, s, hashBounds(s.cur.bounds), true), ten), "a layout entry has them")
	s.prev.bounds = []float64{2, 10}
	assert.Equal(t, 2, bytes.Count(appendSeriesState(nil, s, 0, false), ten))
	assert.Equal(t, 1, bytes.Count(appendSeriesState(nil, s, hashBounds(s.cur.bounds), true), ten), "the previous point's, inline")
}

func TestSeriesStorageKey(t *testing.T) {
	assert.Equal(t, "series/0123456789abcdef", seriesStorageKey(0x0123456789abcdef))
	assert.Equal(t, "layout/0123456789abcdef", layoutStorageKey(0x0123456789abcdef))
	h, ok := parseLayoutKey("layout/0123456789abcdef")
	assert.True(t, ok)
	assert.Equal(t, uint64(0x0123456789abcdef), h)
	k, ok := parseSeriesKey("series/0123456789abcdef")
	assert.True(t, ok)
	assert.Equal(t, uint64(0x0123456789abcdef), k)
	for _, bad := range []string{"series/0123", "series/0123456789abcdeg", "queue/0123456789abcdef"} {
		_, ok := parseSeriesKey(bad)
		assert.False(t, ok, bad)
	}
}

// The series key is saved: it must not depend on the process. It is built
// from xxhash64 (seed 0) of the strings; the published test vectors of
// xxhash64 are "" -> 0xef46db3751d8e999 and "a" -> 0xd24ec4f1a98c6e5b.
func TestSeriesKeyIsStable(t *testing.T) {
	attrs := pcommon.NewMap()
	attrs.PutStr("a", "")
	assert.Equal(t, mix(0xd24ec4f1a98c6e5b, 0xef46db3751d8e999), hashMap(attrs))
	assert.Equal(t, mix(0xef46db3751d8e999, 0xd24ec4f1a98c6e5b), hashStrings("", "a"))
}
