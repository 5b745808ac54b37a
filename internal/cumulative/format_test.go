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
		{kind: sumSeries, seen: seen, cur: snapshot{start: 1, ts: 2, isInt: true, intValue: -5}},
		{kind: sumSeries, seen: seen, hasPrev: true, cur: snapshot{start: 1, ts: 3, value: 2.5}, prev: snapshot{start: 1, ts: 2, value: 0.1}},
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
			cur:  snapshot{start: 1, ts: 3, count: 9, sum: 1, histogramPart: &histogramPart{max: 8, hasMax: true, scale: -2, zeroCount: 1, posOffset: -3, counts: []uint64{1, 1 << 40}, negOffset: 7, neg: []uint64{5}}},
			prev: snapshot{start: 1, ts: 2, count: 2, sum: 0.5, histogramPart: &histogramPart{scale: 20, posOffset: math32Max}},
		},
		{kind: summarySeries, seen: seen, cur: snapshot{start: 1, ts: 2, count: 4, sum: 10}},
	} {
		b := appendSeriesState(nil, s)
		var got series
		require.NoError(t, decodeSeriesState(b, &got))
		assert.Equal(t, s.kind, got.kind)
		assert.Equal(t, s.seen, got.seen)
		assert.Equal(t, s.cur, got.cur)
		assert.Equal(t, s.prev, got.prev)
		assert.Equal(t, s.hasPrev, got.hasPrev)
		assert.Equal(t, s.curSent, got.curSent)

		// Every truncation and a trailing byte are errors, never a panic.
		for n := range len(b) {
			assert.Error(t, decodeSeriesState(b[:n], &series{}), "kind %d truncated to %d", s.kind, n)
		}
		assert.Error(t, decodeSeriesState(append(b, 0), &series{}))
	}
}

const math32Max = 1<<31 - 1

func TestStateHistogramBoundsWrittenOnce(t *testing.T) {
	ten := binary.LittleEndian.AppendUint64(nil, math.Float64bits(10))
	s := &series{kind: histogramSeries, hasPrev: true,
		cur:  snapshot{histogramPart: &histogramPart{bounds: []float64{1, 10}, counts: []uint64{1, 3, 0}}},
		prev: snapshot{histogramPart: &histogramPart{bounds: []float64{1, 10}, counts: []uint64{1, 2, 0}}},
	}
	assert.Equal(t, 1, bytes.Count(appendSeriesState(nil, s), ten))
	s.prev.bounds = []float64{2, 10}
	assert.Equal(t, 2, bytes.Count(appendSeriesState(nil, s), ten))
}

func TestSeriesStorageKey(t *testing.T) {
	assert.Equal(t, "series/0123456789abcdef", seriesStorageKey(0x0123456789abcdef))
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
