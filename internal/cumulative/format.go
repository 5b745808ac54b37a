// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cumulative // import "github.com/gpubuild/otelcol-gpubuild/internal/cumulative"

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"slices"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/gpubuild/otelcol-gpubuild/internal/state/encoding"
)

// With Attach, the tracker's state is saved through a
// storage extension client so that a restarted collector (kill -9, OOM, a
// sidecar restarted while the service keeps running) continues every series
// from the last point converted before it stopped: the first point after the
// restart is sent as the delta from that point, not as the total since start.
//
// Storage layout (one storage client per tracker; the exporter names its
// client "cumulative_state"):
//
//	"series/<16 hex digits>"  one entry per series; the digits are the series
//	                          key (see hashMap: xxhash64, no seed, so stable
//	                          across processes), big-endian
//	"layout/<16 hex digits>"  histogram bounds that series entries refer to;
//	                          the digits are their hash (hashBounds)
//	"watermark"               the newest point of any forgotten series
//
// A series entry (format 2) is stateFormat, the series kind, flags (bit 0:
// the previous point is kept, bit 1: the last point was sent as a first
// point, bit 2: the previous point has the last one's histogram bounds,
// bit 3: the last point's bounds are a layout entry, given by its hash),
// then the last point's start, its timestamp as the difference from its
// start, when the series was last seen as the difference from that
// timestamp, the rest of the last point and, if kept, the point before:
// its start and timestamp as differences from the last point's, then the
// rest of it (appendPoint). Differences are wrapping signed varints, so
// every value reads back exactly. Other integers are varints, floats their
// 8 IEEE-754 bytes, hashes 8 bytes, little-endian (internal/state/encoding):
// the state read back is the exact state written. A layout entry is
// stateFormat and the bounds.
//
// Format 1 (read, no longer written) wrote every time in full (last seen
// before the points) and the bounds in every entry: format 2 takes about
// half the bytes of a histogram series with the SDKs' default bounds
// (BenchmarkSavedBytes), and so half of the storage's writes.
//
// Entries are written after the data they describe was accepted by the
// sending queue, all of one ConsumeMetrics call in one Batch (one
// transaction with file_storage); a conversion undone because the queue
// refused the data is not written. Forgotten series are deleted in the same
// Batch, and every layout an entry of the Batch refers to is written in it
// again, so that no entry is ever saved without its layout.
//
// At start, a client that can list its entries (storage.Walker, which
// file_storage is) is read whole: every series is back in memory, entries
// older than Config.TTL are deleted and raise the watermark as an
// eviction does, and layouts no restored series refers to are deleted.
// Otherwise each series not in memory is read with one Get the first time
// one of its points arrives (and its layout with another).
const (
	// stateFormat is the first byte of every entry this version writes.
	stateFormat = 2
	// stateFormatOne is the format of earlier versions, still read.
	stateFormatOne = 1
	// SeriesKeyPrefix starts the storage key of every series entry.
	SeriesKeyPrefix = "series/"
	// LayoutKeyPrefix starts the storage key of every layout entry.
	LayoutKeyPrefix = "layout/"
	// WatermarkKey is the storage key of the watermark entry.
	WatermarkKey = "watermark"
)

var (
	errCorruptState = errors.New("corrupt cumulative state entry")
	// errNoLayout: an entry refers to a layout that is not saved (or not read yet).
	errNoLayout = errors.New("cumulative state entry refers to a missing layout")
)

// seriesKeyLen is the length of a series (and a layout) entry's storage key.
const seriesKeyLen = len(SeriesKeyPrefix) + 16

func seriesStorageKey(key uint64) string {
	return string(appendSeriesStorageKey(make([]byte, 0, seriesKeyLen), key))
}

func appendSeriesStorageKey(b []byte, key uint64) []byte {
	return appendHexKey(b, SeriesKeyPrefix, key)
}

func layoutStorageKey(hash uint64) string {
	return string(appendHexKey(make([]byte, 0, seriesKeyLen), LayoutKeyPrefix, hash))
}

func appendHexKey(b []byte, prefix string, v uint64) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], v)
	return hex.AppendEncode(append(b, prefix...), k[:])
}

func parseSeriesKey(key string) (uint64, bool) { return parseHexKey(key, SeriesKeyPrefix) }

func parseLayoutKey(key string) (uint64, bool) { return parseHexKey(key, LayoutKeyPrefix) }

func parseHexKey(key, prefix string) (uint64, bool) {
	digits, ok := strings.CutPrefix(key, prefix)
	if !ok || len(digits) != 16 {
		return 0, false
	}
	b, err := hex.DecodeString(digits)
	if err != nil {
		return 0, false
	}
	return binary.BigEndian.Uint64(b), true
}

const (
	flagHasPrev = 1 << iota
	flagCurSent
	// flagSameBounds: the previous point's histogram bounds are the last
	// point's, and not written twice.
	flagSameBounds
	// flagLayoutBounds: the last point's bounds are a layout entry, written
	// as its hash (format 2).
	flagLayoutBounds
)

const (
	flagHasMin = 1 << iota
	flagHasMax
)

// boundsMode says how appendPoint writes a histogram's bounds.
type boundsMode uint8

const (
	boundsInline boundsMode = iota
	boundsByLayout
	boundsOmitted // the previous point's, equal to the last one's
)

// appendSeriesState writes s in format 2. layout is the hash of the last
// point's bounds when they are a shared layout (layouts.id), whose entry
// the caller saves with this one.
func appendSeriesState(b []byte, s *series, layout uint64, byLayout bool) []byte {
	var flags byte
	if s.hasPrev {
		flags |= flagHasPrev
	}
	if s.curSent {
		flags |= flagCurSent
	}
	sameBounds := s.hasPrev && s.kind == histogramSeries && slices.Equal(s.prev.bounds, s.cur.bounds)
	if sameBounds {
		flags |= flagSameBounds
	}
	byLayout = byLayout && s.kind == histogramSeries
	curBounds := boundsInline
	if byLayout {
		flags |= flagLayoutBounds
		curBounds = boundsByLayout
	}
	b = append(b, stateFormat, byte(s.kind), flags)
	b = binary.AppendUvarint(b, uint64(s.cur.start))
	b = binary.AppendVarint(b, int64(s.cur.ts-s.cur.start))
	b = binary.AppendVarint(b, s.seen-int64(s.cur.ts))
	b = appendPoint(b, &s.cur, s.kind, curBounds, layout)
	if s.hasPrev {
		b = binary.AppendVarint(b, int64(s.prev.start-s.cur.start))
		b = binary.AppendVarint(b, int64(s.prev.ts-s.cur.ts))
		prevBounds := boundsInline
		if sameBounds {
			prevBounds = boundsOmitted
		}
		b = appendPoint(b, &s.prev, s.kind, prevBounds, 0)
	}
	return b
}

// appendPoint writes the fields of p after its times that a series of this
// kind uses; a histogram's bounds as mode says.
func appendPoint(b []byte, p *snapshot, kind seriesKind, mode boundsMode, layout uint64) []byte {
	if kind == sumSeries {
		if p.isInt {
			return binary.AppendVarint(append(b, 1), p.intValue())
		}
		return encoding.AppendFloat(append(b, 0), p.value())
	}
	b = binary.AppendUvarint(b, p.count)
	b = encoding.AppendFloat(b, p.sum)
	if kind == summarySeries {
		return b
	}
	var flags byte
	if p.hasMin {
		flags |= flagHasMin
	}
	if p.hasMax {
		flags |= flagHasMax
	}
	b = append(b, flags)
	if p.hasMin {
		b = encoding.AppendFloat(b, p.min)
	}
	if p.hasMax {
		b = encoding.AppendFloat(b, p.max)
	}
	if kind == histogramSeries {
		switch mode {
		case boundsInline:
			b = encoding.AppendFloats(b, p.bounds)
		case boundsByLayout:
			b = encoding.AppendUint64(b, layout)
		}
		return encoding.AppendUvarints(b, p.counts)
	}
	b = binary.AppendVarint(b, int64(p.scale))
	b = binary.AppendUvarint(b, p.zeroCount)
	b = binary.AppendVarint(b, int64(p.posOffset))
	b = encoding.AppendUvarints(b, p.counts)
	b = binary.AppendVarint(b, int64(p.negOffset))
	return encoding.AppendUvarints(b, p.neg)
}

// layoutLookup returns the saved bounds of a layout hash, or false.
type layoutLookup func(hash uint64) ([]float64, bool)

// decodeSeriesState reads an entry of format 1 or 2 into s; layout finds
// the bounds a format-2 entry refers to (errNoLayout when it cannot).
func decodeSeriesState(b []byte, s *series, layout layoutLookup) error {
	r := newStateReader(b)
	format := r.Byte()
	if format != stateFormat && format != stateFormatOne {
		return errCorruptState
	}
	kind := seriesKind(r.Byte())
	if kind > summarySeries {
		return errCorruptState
	}
	flags := r.Byte()
	known := byte(flagHasPrev | flagCurSent | flagSameBounds)
	if format == stateFormat {
		known |= flagLayoutBounds
	}
	sameBounds := flags&flagSameBounds != 0
	byLayout := flags&flagLayoutBounds != 0
	if flags&^known != 0 ||
		(sameBounds || byLayout) && kind != histogramSeries ||
		sameBounds && flags&flagHasPrev == 0 {
		return errCorruptState
	}
	s.kind = kind
	s.hasPrev = flags&flagHasPrev != 0
	s.curSent = flags&flagCurSent != 0
	curBounds := boundsInline
	if byLayout {
		curBounds = boundsByLayout
	}
	prevBounds := boundsInline
	if sameBounds {
		prevBounds = boundsOmitted
	}

	if format == stateFormatOne {
		s.seen = r.Varint()
		s.cur.start = pcommon.Timestamp(r.Uvarint())
		s.cur.ts = pcommon.Timestamp(r.Uvarint())
		r.point(&s.cur, kind, curBounds)
		if s.hasPrev {
			s.prev.start = pcommon.Timestamp(r.Uvarint())
			s.prev.ts = pcommon.Timestamp(r.Uvarint())
			r.point(&s.prev, kind, prevBounds)
		}
	} else {
		s.cur.start = pcommon.Timestamp(r.Uvarint())
		s.cur.ts = s.cur.start + pcommon.Timestamp(r.Varint())
		s.seen = int64(s.cur.ts) + r.Varint()
		layoutHash := r.point(&s.cur, kind, curBounds)
		if s.hasPrev {
			s.prev.start = s.cur.start + pcommon.Timestamp(r.Varint())
			s.prev.ts = s.cur.ts + pcommon.Timestamp(r.Varint())
			r.point(&s.prev, kind, prevBounds)
		}
		if err := r.Done(); err != nil {
			return err
		}
		if byLayout {
			bounds, ok := layout(layoutHash)
			if !ok {
				return errNoLayout
			}
			s.cur.bounds = bounds
		}
	}
	if sameBounds && r.Err() == nil {
		s.prev.bounds = s.cur.bounds // bounds are never written to (layouts.go)
	}
	return r.Done()
}

// appendLayout writes a layout entry: the bounds a hash stands for.
func appendLayout(b []byte, bounds []float64) []byte {
	return encoding.AppendFloats(append(b, stateFormat), bounds)
}

// decodeLayout reads a layout entry and checks it against its hash.
func decodeLayout(b []byte, hash uint64) ([]float64, error) {
	r := newStateReader(b)
	if r.Byte() != stateFormat {
		return nil, errCorruptState
	}
	bounds := r.Floats()
	if err := r.Done(); err != nil {
		return nil, err
	}
	if len(bounds) == 0 || hashBounds(bounds) != hash {
		return nil, errCorruptState
	}
	return bounds, nil
}

func appendWatermark(b []byte, wm pcommon.Timestamp) []byte {
	return binary.AppendUvarint(append(b, stateFormat), uint64(wm))
}

// decodeWatermark reads a watermark entry; nil (no entry) is 0.
func decodeWatermark(b []byte) (pcommon.Timestamp, error) {
	if b == nil {
		return 0, nil
	}
	r := newStateReader(b)
	if f := r.Byte(); f != stateFormat && f != stateFormatOne {
		return 0, errCorruptState
	}
	wm := pcommon.Timestamp(r.Uvarint())
	if err := r.Done(); err != nil {
		return 0, err
	}
	return wm, nil
}

// stateReader decodes an entry (internal/state/encoding); after the first
// error every read returns 0.
type stateReader struct{ encoding.Reader }

func newStateReader(b []byte) stateReader {
	return stateReader{encoding.NewReader(b, errCorruptState)}
}

// point reads what appendPoint wrote (p's times are read by the caller);
// it returns the layout hash when mode is boundsByLayout.
func (r *stateReader) point(p *snapshot, kind seriesKind, mode boundsMode) (layout uint64) {
	if kind == sumSeries {
		switch r.Byte() {
		case 1:
			p.setIntValue(r.Varint())
		case 0:
			p.setValue(r.Float())
		default:
			r.Fail()
		}
		return 0
	}
	p.count = r.Uvarint()
	p.sum = r.Float()
	if kind == summarySeries {
		return 0
	}
	var h histogramPart
	flags := r.Byte()
	if flags&^(flagHasMin|flagHasMax) != 0 {
		r.Fail()
		return 0
	}
	if h.hasMin = flags&flagHasMin != 0; h.hasMin {
		h.min = r.Float()
	}
	if h.hasMax = flags&flagHasMax != 0; h.hasMax {
		h.max = r.Float()
	}
	if kind == histogramSeries {
		switch mode {
		case boundsInline:
			h.bounds = r.Floats()
		case boundsByLayout:
			layout = r.Uint64()
		}
		h.counts = r.Uvarints()
	} else {
		e := new(exponentialPart)
		e.scale = r.Int32()
		e.zeroCount = r.Uvarint()
		e.posOffset = r.Int32()
		h.counts = r.Uvarints()
		e.negOffset = r.Int32()
		e.neg = r.Uvarints()
		h.exponentialPart = e
	}
	var part *histogramPart
	if len(h.counts) > 0 {
		// Restored in the part a converted point would be kept in.
		part = newHistogramPart(len(h.counts))
	} else {
		part = new(histogramPart)
	}
	h.counts = append(part.counts, h.counts...)
	*part = h
	p.histogramPart = part
	return layout
}
