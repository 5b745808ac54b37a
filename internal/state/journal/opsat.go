// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"errors"
	"io"
	"os"
	"unsafe"
)

// opReader returns the operation at an offset of the journal's whole
// records, which must be one of key's: its type and, for a set, its
// value, valid until the next call.
type opReader interface {
	op(off int64, key string) (typ byte, value []byte, err error)
	// holds says whether addr is in the reader's mapping of the journal.
	holds(addr uintptr) bool
}

var (
	errIndexMismatch = errors.New("the index does not match the journal")
	errIndexPastEnd  = errors.New("the index points past the journal's records")
)

// opIn reads the operation at the start of b, which must be one of key's;
// complete is false when b holds only part of it.
func opIn(b []byte, key string) (typ byte, value []byte, complete bool, err error) {
	if len(b) == 0 {
		return 0, nil, false, nil
	}
	k, rest, ok := readBytes(b[1:])
	switch {
	case !ok:
		return 0, nil, false, nil
	case string(k) != key:
		return 0, nil, false, errIndexMismatch
	case b[0] == opDelete:
		return opDelete, nil, true, nil
	}
	v, _, ok := readBytes(rest)
	return opSet, v, ok, nil
}

// mappedOps reads operations from the journal mapped into memory.
type mappedOps []byte

func (m mappedOps) holds(addr uintptr) bool {
	start := uintptr(unsafe.Pointer(unsafe.SliceData(m)))
	return len(m) > 0 && addr >= start && addr-start < uintptr(len(m))
}

func (m mappedOps) op(off int64, key string) (byte, []byte, error) {
	if off < 0 || off >= int64(len(m)) {
		return 0, nil, errIndexPastEnd
	}
	typ, value, complete, err := opIn(m[off:], key)
	if err == nil && !complete {
		err = errIndexPastEnd
	}
	return typ, value, err
}

// window reads operations through one buffer, a read call for each
// operation it does not hold already: where the journal cannot be mapped.
type window struct {
	f     *os.File
	size  int64 // the end of the whole records
	buf   []byte
	start int64 // the offset of buf[0]
	n     int   // bytes of buf read
}

// windowBytes is what a window reads at an operation's position: a
// derivation's job entry whole, with little more copied (the next
// operation read is anywhere in the journal). A larger one is read again,
// whole.
const windowBytes = 1 << 10

func newWindow(f *os.File, size int64) *window {
	return &window{f: f, size: size, buf: make([]byte, min(size, windowBytes))}
}

func (w *window) holds(uintptr) bool { return false }

func (w *window) op(off int64, key string) (byte, []byte, error) {
	for {
		if off >= w.start && off < w.start+int64(w.n) {
			typ, value, complete, err := opIn(w.buf[off-w.start:w.n], key)
			if complete || err != nil {
				return typ, value, err
			}
			if off == w.start && w.n == len(w.buf) && int64(len(w.buf)) < w.size-off {
				w.buf = make([]byte, min(2*len(w.buf), int(w.size-off))) // an operation larger than the buffer
			} else if off == w.start {
				return 0, nil, errIndexPastEnd
			}
		}
		w.start, w.n = off, 0
		n, err := w.f.ReadAt(w.buf[:min(int64(len(w.buf)), max(w.size-off, 0))], off)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, nil, err
		}
		w.n = n
		if n == 0 {
			return 0, nil, errIndexPastEnd
		}
	}
}
