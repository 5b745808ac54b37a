// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package encoding writes and reads the fields that persisted state
// entries are built of: unsigned and signed varints, doubles as their 8
// IEEE-754 bytes little-endian, and length-prefixed bytes and lists. What
// an entry holds, and in which order, is the format of the package that
// writes it (internal/cumulative, internal/buildjob/derive), documented in
// its README; this package only keeps the encoding of one field the same
// everywhere, so that a value read back is exactly the value written.
package encoding // import "github.com/gpubuild/otelcol-gpubuild/internal/state/encoding"

import (
	"encoding/binary"
	"math"
)

// AppendFloat appends v as its 8 IEEE-754 bytes, little-endian.
func AppendFloat(b []byte, v float64) []byte {
	return AppendUint64(b, math.Float64bits(v))
}

// AppendUint64 appends v as 8 bytes, little-endian (for hashes, which
// a varint would make longer).
func AppendUint64(b []byte, v uint64) []byte {
	return binary.LittleEndian.AppendUint64(b, v)
}

// AppendBytes appends p after its length (a uvarint).
func AppendBytes(b, p []byte) []byte {
	return append(binary.AppendUvarint(b, uint64(len(p))), p...)
}

// AppendString appends s after its length (a uvarint).
func AppendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// AppendUvarints appends the length of vs, then each as a uvarint.
func AppendUvarints(b []byte, vs []uint64) []byte {
	b = binary.AppendUvarint(b, uint64(len(vs)))
	for _, v := range vs {
		b = binary.AppendUvarint(b, v)
	}
	return b
}

// AppendFloats appends the length of vs, then each as AppendFloat does.
func AppendFloats(b []byte, vs []float64) []byte {
	b = binary.AppendUvarint(b, uint64(len(vs)))
	for _, v := range vs {
		b = AppendFloat(b, v)
	}
	return b
}

// Writer appends the fields of one entry to a buffer.
type Writer struct{ b []byte }

// NewWriter returns a writer that appends to buf.
func NewWriter(buf []byte) Writer { return Writer{b: buf} }

// Encoded returns the entry written so far.
func (w *Writer) Encoded() []byte { return w.b }

// Byte appends one byte.
func (w *Writer) Byte(v byte) { w.b = append(w.b, v) }

// Uvarint appends an unsigned varint.
func (w *Writer) Uvarint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }

// Varint appends a signed (zigzag) varint.
func (w *Writer) Varint(v int64) { w.b = binary.AppendVarint(w.b, v) }

// Float appends v as AppendFloat does.
func (w *Writer) Float(v float64) { w.b = AppendFloat(w.b, v) }

// Text appends s as AppendString does.
func (w *Writer) Text(s string) { w.b = AppendString(w.b, s) }

// Bytes appends p as AppendBytes does.
func (w *Writer) Bytes(p []byte) { w.b = AppendBytes(w.b, p) }

// Uvarints appends vs as AppendUvarints does.
func (w *Writer) Uvarints(vs []uint64) { w.b = AppendUvarints(w.b, vs) }

// Reader reads the fields of one entry. The first failure sticks: every
// later read returns the zero value, and Err and Done report it.
type Reader struct {
	b       []byte
	err     error
	corrupt error
}

// NewReader reads b; a field that is truncated or malformed fails the
// reader with corrupt, the error its package reports for such an entry.
func NewReader(b []byte, corrupt error) Reader {
	return Reader{b: b, corrupt: corrupt}
}

// Fail fails the reader as corrupt.
func (r *Reader) Fail() { r.FailWith(r.corrupt) }

// FailWith fails the reader with err, unless it failed already.
func (r *Reader) FailWith(err error) {
	if r.err == nil {
		r.err = err
	}
	r.b = nil
}

// Err is the first failure, or nil.
func (r *Reader) Err() error { return r.err }

// Done reports the first failure, or the corrupt error when bytes are left
// over: an entry must decode exactly to its end.
func (r *Reader) Done() error {
	if r.err == nil && len(r.b) != 0 {
		return r.corrupt
	}
	return r.err
}

// Byte reads one byte.
func (r *Reader) Byte() byte {
	if r.err != nil || len(r.b) < 1 {
		r.Fail()
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

// Uvarint reads an unsigned varint.
func (r *Reader) Uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.Fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

// Varint reads a signed (zigzag) varint.
func (r *Reader) Varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.Fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

// Int32 reads a varint that must fit in an int32.
func (r *Reader) Int32() int32 {
	v := r.Varint()
	if v < math.MinInt32 || v > math.MaxInt32 {
		r.Fail()
		return 0
	}
	return int32(v)
}

// Float reads what AppendFloat wrote.
func (r *Reader) Float() float64 { return math.Float64frombits(r.Uint64()) }

// Uint64 reads what AppendUint64 wrote.
func (r *Reader) Uint64() uint64 {
	if r.err != nil || len(r.b) < 8 {
		r.Fail()
		return 0
	}
	v := binary.LittleEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

// Bytes reads length-prefixed bytes; the result aliases the entry.
func (r *Reader) Bytes() []byte {
	n := r.Uvarint()
	if r.err != nil || uint64(len(r.b)) < n {
		r.Fail()
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

// Text reads a length-prefixed string.
func (r *Reader) Text() string { return string(r.Bytes()) }

// Length reads a list's length, checked against what is left (each
// element takes at least size bytes), so that a corrupt entry cannot ask
// for a huge slice.
func (r *Reader) Length(size int) int {
	n := r.Uvarint()
	if n > uint64(len(r.b)/size) {
		r.Fail()
		return 0
	}
	return int(n)
}

// Floats reads what AppendFloats wrote; an empty list is nil.
func (r *Reader) Floats() []float64 {
	n := r.Length(8)
	if n == 0 {
		return nil
	}
	vs := make([]float64, n)
	for i := range vs {
		vs[i] = r.Float()
	}
	return vs
}

// Uvarints reads what AppendUvarints wrote; an empty list is nil.
func (r *Reader) Uvarints() []uint64 {
	n := r.Length(1)
	if n == 0 {
		return nil
	}
	vs := make([]uint64, n)
	for i := range vs {
		vs[i] = r.Uvarint()
	}
	return vs
}
