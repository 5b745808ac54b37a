// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package encoding

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var errTest = errors.New("test: corrupt entry")

// The bytes of each field, worked out from the encoding's definition:
// uvarint 300 = 0xac 0x02 (7 bits at a time, low first); varint -3 is
// zigzag 5; 1.5 is 0x3ff8000000000000, little-endian.
func TestFieldBytes(t *testing.T) {
	w := NewWriter([]byte{0x01})
	w.Byte(7)
	w.Uvarint(300)
	w.Varint(-3)
	w.Float(1.5)
	w.Text("ab")
	w.Bytes([]byte{9})
	w.Uvarints([]uint64{1, 128})
	want := []byte{
		0x01, 7,
		0xac, 0x02,
		0x05,
		0, 0, 0, 0, 0, 0, 0xf8, 0x3f,
		2, 'a', 'b',
		1, 9,
		2, 1, 0x80, 0x01,
	}
	assert.Equal(t, want, w.Encoded())
	assert.Equal(t, []byte{2, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f, 0, 0, 0, 0, 0, 0, 0xf0, 0xbf}, AppendFloats(nil, []float64{1.5, -1}))

	// A hash: 8 bytes, little-endian, whatever its value.
	h := AppendUint64(nil, 0x0102030405060708)
	assert.Equal(t, []byte{8, 7, 6, 5, 4, 3, 2, 1}, h)
	hr := NewReader(h, errTest)
	assert.Equal(t, uint64(0x0102030405060708), hr.Uint64())
	require.NoError(t, hr.Done())
	short := NewReader(h[:7], errTest)
	short.Uint64()
	assert.ErrorIs(t, short.Err(), errTest)

	r := NewReader(want[1:], errTest)
	assert.Equal(t, byte(7), r.Byte())
	assert.Equal(t, uint64(300), r.Uvarint())
	assert.Equal(t, int64(-3), r.Varint())
	assert.Equal(t, 1.5, r.Float())
	assert.Equal(t, "ab", r.Text())
	assert.Equal(t, []byte{9}, r.Bytes())
	assert.Equal(t, []uint64{1, 128}, r.Uvarints())
	require.NoError(t, r.Done())
}

func TestRoundTripIsExact(t *testing.T) {
	floats := []float64{0, math.Copysign(0, -1), math.SmallestNonzeroFloat64, math.MaxFloat64, math.Inf(-1), 1e-300}
	b := AppendFloats(nil, floats)
	b = AppendUvarints(b, []uint64{0, math.MaxUint64})
	b = AppendString(b, "größe")
	r := NewReader(b, errTest)
	got := r.Floats()
	require.Len(t, got, len(floats))
	for i := range floats {
		assert.Equal(t, math.Float64bits(floats[i]), math.Float64bits(got[i]))
	}
	assert.Equal(t, []uint64{0, math.MaxUint64}, r.Uvarints())
	assert.Equal(t, "größe", r.Text())
	require.NoError(t, r.Done())

	r = NewReader(AppendUvarints(AppendFloats(nil, nil), nil), errTest)
	assert.Nil(t, r.Floats(), "an empty list is nil")
	assert.Nil(t, r.Uvarints())
	require.NoError(t, r.Done())
}

func TestTruncatedOrLeftOverIsCorrupt(t *testing.T) {
	for name, read := range map[string]func(r *Reader){
		"byte":     func(r *Reader) { r.Byte() },
		"uvarint":  func(r *Reader) { r.Uvarint() },
		"varint":   func(r *Reader) { r.Varint() },
		"float":    func(r *Reader) { r.Float() },
		"text":     func(r *Reader) { r.Text() },
		"floats":   func(r *Reader) { r.Floats() },
		"uvarints": func(r *Reader) { r.Uvarints() },
	} {
		r := NewReader(nil, errTest)
		read(&r)
		assert.ErrorIs(t, r.Done(), errTest, name)
	}
	// A length beyond what is left, an unfinished varint, an int32 out of range.
	for name, b := range map[string][]byte{
		"text longer than the entry":  {5, 'a'},
		"list longer than the entry":  {3, 0, 0, 0, 0, 0, 0, 0, 0},
		"unfinished varint":           {0x80},
		"int32 out of range (2^31)":   {0x80, 0x80, 0x80, 0x80, 0x10},
		"two bytes where one is read": {1, 2},
	} {
		r := NewReader(b, errTest)
		switch name {
		case "text longer than the entry":
			assert.Empty(t, r.Text())
		case "list longer than the entry":
			assert.Nil(t, r.Floats())
		case "unfinished varint":
			assert.Zero(t, r.Uvarint())
		case "int32 out of range (2^31)":
			assert.Zero(t, r.Int32())
		default:
			assert.Equal(t, byte(1), r.Byte())
		}
		assert.ErrorIs(t, r.Done(), errTest, name)
	}
}

// The first failure sticks: later reads return zero values and do not
// replace it.
func TestFirstFailureSticks(t *testing.T) {
	errVersion := errors.New("test: unknown version")
	r := NewReader([]byte{2, 0xac, 0x02}, errTest)
	r.Byte()
	r.FailWith(errVersion)
	assert.Zero(t, r.Uvarint())
	assert.Empty(t, r.Text())
	assert.Zero(t, r.Byte())
	assert.ErrorIs(t, r.Err(), errVersion)
	assert.ErrorIs(t, r.Done(), errVersion)
}
