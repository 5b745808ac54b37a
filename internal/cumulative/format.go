package cumulative // import "github.com/gpubuild/otelcol-gpubuild/internal/cumulative"

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"slices"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/gpubuild/otelcol-gpubuild/internal/stateformat"
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
//	"watermark"               the newest point of any forgotten series
//
// A series entry is stateFormat, the series kind, flags (bit 0: the previous
// point is kept, bit 1: the last point was sent as a first point, bit 2: the
// previous point has the last one's histogram bounds), when it was last seen
// (varint Unix nanoseconds), then its last point and, if kept, the point
// before (appendSnapshot). Integers are varints, floats their
// 8 IEEE-754 bytes, little-endian (internal/stateformat): the state read
// back is the exact state written.
//
// Entries are written after the data they describe was accepted by the
// sending queue, all of one ConsumeMetrics call in one Batch (one
// transaction with file_storage); a conversion undone because the queue
// refused the data is not written. Forgotten series are deleted in the same
// Batch.
//
// At start, a client that can list its entries (storage.Walker, which
// file_storage is) is read whole: every series is back in memory, entries
// older than Config.TTL are deleted and raise the watermark as an
// eviction does. Otherwise each series not in memory is read with one Get
// the first time one of its points arrives.
const (
	// stateFormat is the first byte of every entry.
	stateFormat = 1
	// SeriesKeyPrefix starts the storage key of every series entry.
	SeriesKeyPrefix = "series/"
	// WatermarkKey is the storage key of the watermark entry.
	WatermarkKey = "watermark"
)

var errCorruptState = errors.New("corrupt cumulative state entry")

// seriesKeyLen is the length of a series entry's storage key.
const seriesKeyLen = len(SeriesKeyPrefix) + 16

func seriesStorageKey(key uint64) string {
	return string(appendSeriesStorageKey(make([]byte, 0, seriesKeyLen), key))
}

func appendSeriesStorageKey(b []byte, key uint64) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], key)
	return hex.AppendEncode(append(b, SeriesKeyPrefix...), k[:])
}

func parseSeriesKey(key string) (uint64, bool) {
	digits, ok := strings.CutPrefix(key, SeriesKeyPrefix)
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
)

const (
	flagHasMin = 1 << iota
	flagHasMax
)

func appendSeriesState(b []byte, s *series) []byte {
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
	b = append(b, stateFormat, byte(s.kind), flags)
	b = binary.AppendVarint(b, s.seen)
	b = appendSnapshot(b, &s.cur, s.kind, true)
	if s.hasPrev {
		b = appendSnapshot(b, &s.prev, s.kind, !sameBounds)
	}
	return b
}

// appendSnapshot writes the fields of p that a series of this kind uses
// (a histogram's bounds only if withBounds).
func appendSnapshot(b []byte, p *snapshot, kind seriesKind, withBounds bool) []byte {
	b = binary.AppendUvarint(b, uint64(p.start))
	b = binary.AppendUvarint(b, uint64(p.ts))
	if kind == sumSeries {
		if p.isInt {
			return binary.AppendVarint(append(b, 1), p.intValue)
		}
		return stateformat.AppendFloat(append(b, 0), p.value)
	}
	b = binary.AppendUvarint(b, p.count)
	b = stateformat.AppendFloat(b, p.sum)
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
		b = stateformat.AppendFloat(b, p.min)
	}
	if p.hasMax {
		b = stateformat.AppendFloat(b, p.max)
	}
	if kind == histogramSeries {
		if withBounds {
			b = stateformat.AppendFloats(b, p.bounds)
		}
		return stateformat.AppendUvarints(b, p.counts)
	}
	b = binary.AppendVarint(b, int64(p.scale))
	b = binary.AppendUvarint(b, p.zeroCount)
	b = binary.AppendVarint(b, int64(p.posOffset))
	b = stateformat.AppendUvarints(b, p.counts)
	b = binary.AppendVarint(b, int64(p.negOffset))
	return stateformat.AppendUvarints(b, p.neg)
}

func decodeSeriesState(b []byte, s *series) error {
	r := newStateReader(b)
	if r.Byte() != stateFormat {
		return errCorruptState
	}
	kind := seriesKind(r.Byte())
	if kind > summarySeries {
		return errCorruptState
	}
	flags := r.Byte()
	sameBounds := flags&flagSameBounds != 0
	if flags&^(flagHasPrev|flagCurSent|flagSameBounds) != 0 ||
		sameBounds && (kind != histogramSeries || flags&flagHasPrev == 0) {
		return errCorruptState
	}
	s.kind = kind
	s.hasPrev = flags&flagHasPrev != 0
	s.curSent = flags&flagCurSent != 0
	s.seen = r.Varint()
	r.snapshot(&s.cur, kind, true)
	if s.hasPrev {
		r.snapshot(&s.prev, kind, !sameBounds)
		if sameBounds && r.Err() == nil {
			s.prev.bounds = s.cur.bounds // bounds are never written to (layouts.go)
		}
	}
	return r.Done()
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
	if r.Byte() != stateFormat {
		return 0, errCorruptState
	}
	wm := pcommon.Timestamp(r.Uvarint())
	if err := r.Done(); err != nil {
		return 0, err
	}
	return wm, nil
}

// stateReader decodes an entry (internal/stateformat); after the first
// error every read returns 0.
type stateReader struct{ stateformat.Reader }

func newStateReader(b []byte) stateReader {
	return stateReader{stateformat.NewReader(b, errCorruptState)}
}

func (r *stateReader) snapshot(p *snapshot, kind seriesKind, withBounds bool) {
	p.start = pcommon.Timestamp(r.Uvarint())
	p.ts = pcommon.Timestamp(r.Uvarint())
	if kind == sumSeries {
		switch r.Byte() {
		case 1:
			p.isInt, p.intValue = true, r.Varint()
		case 0:
			p.value = r.Float()
		default:
			r.Fail()
		}
		return
	}
	p.count = r.Uvarint()
	p.sum = r.Float()
	if kind == summarySeries {
		return
	}
	p.histogramPart = new(histogramPart)
	flags := r.Byte()
	if flags&^(flagHasMin|flagHasMax) != 0 {
		r.Fail()
		return
	}
	if p.hasMin = flags&flagHasMin != 0; p.hasMin {
		p.min = r.Float()
	}
	if p.hasMax = flags&flagHasMax != 0; p.hasMax {
		p.max = r.Float()
	}
	if kind == histogramSeries {
		if withBounds {
			p.bounds = r.Floats()
		}
		p.counts = r.Uvarints()
		return
	}
	p.scale = r.Int32()
	p.zeroCount = r.Uvarint()
	p.posOffset = r.Int32()
	p.counts = r.Uvarints()
	p.negOffset = r.Int32()
	p.neg = r.Uvarints()
}
