// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package translate

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// groups makes datums for points of the given sizes (datums per point).
func groups(sizes ...int) []Datum {
	var out []Datum
	for p, n := range sizes {
		for i := 0; i < n; i++ {
			out = append(out, Datum{Name: "m", Kind: KindValue, Resolution: 60, Point: int32(p)})
		}
	}
	return out
}

func requestSizes(reqs []PackedRequest) []int {
	var n []int
	for _, r := range reqs {
		n = append(n, r.N)
	}
	return n
}

// assertPointsWhole checks that no data point is split across requests.
func assertPointsWhole(t *testing.T, packed []Datum, reqs []PackedRequest) {
	t.Helper()
	home := map[int32]int{}
	for ri, r := range reqs {
		for _, d := range packed[r.First : r.First+r.N] {
			if prev, ok := home[d.Point]; ok && prev != ri {
				t.Fatalf("point %d is in requests %d and %d", d.Point, prev, ri)
			}
			home[d.Point] = ri
		}
	}
}

func TestPackByCount(t *testing.T) {
	sizes := make([]int, 2500)
	for i := range sizes {
		sizes[i] = 1
	}
	packed := groups(sizes...)
	reqs := Pack(packed, "NS", nil)
	assert.Equal(t, []int{1000, 1000, 500}, requestSizes(reqs))
	assert.Len(t, packed, 2500)
}

func TestPackFillsGapsFirstFit(t *testing.T) {
	// 999 histograms of 3 datums and 3 gauges: 3000 datums. In order, each
	// request would hold 333 histograms (999 datums) and the gauges would
	// need a fourth; first-fit puts them in the gaps: 3 requests.
	var sizes []int
	for i := 0; i < 999; i++ {
		sizes = append(sizes, 3)
	}
	sizes = append(sizes, 1, 1, 1)
	packed := groups(sizes...)
	reqs := Pack(packed, "NS", nil)
	assert.Equal(t, []int{1000, 1000, 1000}, requestSizes(reqs))
	assertPointsWhole(t, packed, reqs)
}

// pack reorders the datums in place: afterwards they are the same datums,
// each request's in their first order, each point's adjacent.
func TestPackReordersInPlaceKeepingEveryDatum(t *testing.T) {
	var sizes []int
	for range 700 {
		sizes = append(sizes, 3) // requests of 999 datums, room for one more
	}
	sizes = append(sizes, 1, 1, 1100, 2, 1) // gap fillers, a point split across requests
	ds := groups(sizes...)
	for i := range ds {
		ds[i].Value = float64(i) // its place before pack
	}
	reqs := Pack(ds, "NS", nil)

	moved := 0
	seen := make([]bool, len(ds))
	for _, r := range reqs {
		prev := -1.0
		for i, d := range ds[r.First : r.First+r.N] {
			require.False(t, seen[int(d.Value)], "datum %v twice", d.Value)
			seen[int(d.Value)] = true
			assert.Greater(t, d.Value, prev, "request order is first order")
			prev = d.Value
			if int(d.Value) != r.First+i {
				moved++
			}
		}
	}
	assert.NotContains(t, seen, false, "every datum is still there")
	assert.Positive(t, moved, "first-fit moved datums; the case tests the reordering")
	assertPointsWhole(t, ds, reqs[:len(reqs)-1]) // all but the split point's last request
}

// What a flush holds while its requests are sent is mostly datums.
func TestDatumStaysSmall(t *testing.T) {
	assert.LessOrEqual(t, unsafe.Sizeof(Datum{}), uintptr(96))
}

func TestPackSplitsAPointTooBigForOneRequest(t *testing.T) {
	packed := groups(2, 1200, 5)
	reqs := Pack(packed, "NS", nil)
	total := 0
	for _, r := range reqs {
		assert.LessOrEqual(t, r.N, MaxDatumsPerRequest)
		total += r.N
	}
	assert.Equal(t, 1207, total)
	assert.Len(t, reqs, 2)
	assert.Len(t, packed, 1207)
}

func TestPackByBytes(t *testing.T) {
	// Datums of 30 dimensions with 1000-character values: about 31 kB each.
	dims := make([]Dimension, 30)
	for i := range dims {
		dims[i] = Dimension{strings.Repeat(string(rune('a'+i)), 10), strings.Repeat("v", 1000)}
	}
	var ds []Datum
	for p := 0; p < 100; p++ {
		ds = append(ds, Datum{Name: "m", Dims: dims, Kind: KindValue, Resolution: 60, Point: int32(p)})
	}
	size := DatumSize(&ds[0])
	perRequest := (MaxRequestBytes - RequestEnvelopeSize("NS")) / size
	reqs := Pack(ds, "NS", nil)
	assert.Len(t, reqs, (100+perRequest-1)/perRequest, "the fewest requests the byte limit allows")
	for _, r := range reqs {
		assert.LessOrEqual(t, r.Bytes, MaxRequestBytes)
	}
}
