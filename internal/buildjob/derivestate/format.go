// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derivestate

import (
	"errors"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/gpubuild/otelcol-gpubuild/internal/buildjob/runmemory"
	"github.com/gpubuild/otelcol-gpubuild/internal/state/encoding"
)

// The persisted derivation state, format version 1. Every value starts with
// the format byte; a value whose byte this version does not know, or which
// does not decode exactly to its end, is skipped with a counted reason. The
// fields are encoded by internal/state/encoding.
// Documented in README.md next to this file; the fixtures are in testdata/.
//
// Keys:
//
//	meta                   start time of cumulative series
//	res/<16 hex>           a resource's attributes (FNV-64a of the value)
//	jobs/<16 hex>/<service>\x00<id>
//	                       the runs of one job, keyed in the order jobs
//	                       were first written (earlier versions: job/<service>\x00<id>)
//	counts/<16 hex>        derived counts not yet accepted by the next consumer
//
// The processor shares the client with its cumulative tracker
// (internal/cumulative), whose keys are series/<16 hex> and watermark.
const (
	// FormatV1 is the format byte every value starts with.
	FormatV1 = 1

	KeyMeta      = "meta"
	KeyResPrefix = "res/"
	KeyJobPrefix = "jobs/"
	// KeyJobPrefixByID is the job key of earlier versions, read and
	// rewritten under KeyJobPrefix at start.
	KeyJobPrefixByID = "job/"
	KeySeriesPrefix  = "counts/"
)

var (
	// ErrUnknownVersion is a value's format byte this version does not read.
	ErrUnknownVersion = errors.New("unknown format version")
	errTruncated      = errors.New("truncated or corrupted entry")
)

// DimKind says what a dimension holds.
type DimKind uint8

// Dimension kinds: unset, a string, another type.
const (
	DimUnset DimKind = iota
	DimString
	DimOther
)

// Dim is the value of one configured dimension: a string, or another
// type's pdata value.
type Dim struct {
	Kind  DimKind
	Str   string
	Other pcommon.Value // only for DimOther
}

// Histogram is a series' explicit-bucket histogram; Counts is empty
// without observations.
type Histogram struct {
	N             uint64
	Sum, Min, Max float64
	Counts        []uint64
}

// Series is one derived series not yet accepted by the next consumer.
type Series struct {
	Family uint8
	// The family's three label strings: result; stage and result; route,
	// method and status class.
	A, B, C string
	// Resource is the key of its resource's entry (Store.Resource).
	Resource string
	Dims     []Dim
	Count    int64
	Hist     Histogram
}

// Run is one remembered job run.
type Run struct {
	State              runmemory.State
	HasSpan            bool
	Start, End         pcommon.Timestamp
	LogStart, LogEnd   pcommon.Timestamp
	SpanStart, SpanEnd pcommon.Timestamp
	Result             string
	ListedAt           time.Time
	// Resource is the key of its resource's entry (Store.Resource).
	Resource string
	Dims     []Dim
}

// writer appends the fields of one entry (internal/state/encoding).
type writer struct{ encoding.Writer }

func newWriter(buf []byte) writer { return writer{encoding.NewWriter(buf)} }

func (w *writer) ts(t pcommon.Timestamp) { w.Uvarint(uint64(t)) }

// reader reads the fields of one entry; the first error sticks.
type reader struct{ encoding.Reader }

func newReader(b []byte) reader { return reader{encoding.NewReader(b, errTruncated)} }

func (r *reader) ts() pcommon.Timestamp { return pcommon.Timestamp(r.Uvarint()) }

// version checks the format byte.
func (r *reader) version() {
	if v := r.Byte(); r.Err() == nil && v != FormatV1 {
		r.FailWith(ErrUnknownVersion)
	}
}

// encodeAttributes marshals a map with the OTLP protobuf encoding, which
// keeps every value type exactly.
func encodeAttributes(m pcommon.Map) []byte {
	ld := plog.NewLogs()
	m.CopyTo(ld.ResourceLogs().AppendEmpty().Resource().Attributes())
	b, _ := (&plog.ProtoMarshaler{}).MarshalLogs(ld) // cannot fail for valid pdata
	return b
}

func decodeAttributes(b []byte) (pcommon.Map, error) {
	ld, err := (&plog.ProtoUnmarshaler{}).UnmarshalLogs(b)
	if err != nil || ld.ResourceLogs().Len() != 1 {
		return pcommon.Map{}, errTruncated
	}
	return ld.ResourceLogs().At(0).Resource().Attributes(), nil
}

// resourceKey names the entry holding a resource's encoded attributes.
func resourceKey(encoded []byte) string {
	h := fnv.New64a()
	_, _ = h.Write(encoded)
	return KeyResPrefix + strconv.FormatUint(h.Sum64()|1<<63, 16)[:16]
}

func encodeResource(encoded []byte) []byte {
	w := newWriter(make([]byte, 0, len(encoded)+4))
	w.Byte(FormatV1)
	w.Bytes(encoded)
	return w.Encoded()
}

func decodeResource(v []byte) (pcommon.Map, error) {
	r := newReader(v)
	r.version()
	b := r.Bytes()
	if err := r.Done(); err != nil {
		return pcommon.Map{}, err
	}
	return decodeAttributes(b)
}

// JobKey is the key of a job's entry. The sequence number leads so that
// new jobs land at the end of the store's B+tree: with job ids that are
// hashes, keys in id order made every write rewrite pages all over the
// file (about 65 pages per request at 2000 spans/s, against 2 or 3).
func JobKey(seq uint64, k runmemory.Key) string {
	return string(appendJobKey(nil, seq, k))
}

// appendJobKey appends JobKey(seq, k) to b: with the top bit set, seq is
// always 16 hexadecimal digits.
func appendJobKey(b []byte, seq uint64, k runmemory.Key) []byte {
	b = append(b, KeyJobPrefix...)
	b = strconv.AppendUint(b, seq|1<<63, 16)
	b = append(b, '/')
	b = append(b, k.Service...)
	b = append(b, 0)
	return append(b, k.JobID...)
}

// parseJobKey reads a job key of this version (seq > 0) or of an earlier
// one (seq 0).
func parseJobKey(key string) (seq uint64, k runmemory.Key, ok bool) {
	var rest string
	if rest, ok = strings.CutPrefix(key, KeyJobPrefix); ok {
		if len(rest) < 17 || rest[16] != '/' {
			return 0, k, false
		}
		v, err := strconv.ParseUint(rest[:16], 16, 64)
		if err != nil || v&^(1<<63) == 0 {
			return 0, k, false
		}
		seq, rest = v&^(1<<63), rest[17:]
	} else if rest, ok = strings.CutPrefix(key, KeyJobPrefixByID); !ok {
		return 0, k, false
	}
	service, id, ok := strings.Cut(rest, "\x00")
	return seq, runmemory.Key{Service: service, JobID: id}, ok
}

// SeriesKey is the key of the series entry numbered id.
func SeriesKey(id uint64) string {
	return KeySeriesPrefix + strconv.FormatUint(id|1<<63, 16)[:16]
}

func parseSeriesKey(key string) (uint64, bool) {
	rest, ok := strings.CutPrefix(key, KeySeriesPrefix)
	if !ok || len(rest) != 16 {
		return 0, false
	}
	v, err := strconv.ParseUint(rest, 16, 64)
	return v &^ (1 << 63), err == nil
}

// dims: count, then per dimension its kind and, for a string, the string;
// for another type, the value as the "v" attribute of an encoded map.
func (w *writer) dims(dims []Dim) {
	w.Uvarint(uint64(len(dims)))
	for _, d := range dims {
		w.Byte(byte(d.Kind))
		switch d.Kind {
		case DimString:
			w.Text(d.Str)
		case DimOther:
			m := pcommon.NewMap()
			d.Other.CopyTo(m.PutEmpty("v"))
			w.Bytes(encodeAttributes(m))
		}
	}
}

func (r *reader) dims(want int) []Dim {
	n := r.Uvarint()
	if r.Err() != nil || n != uint64(want) {
		r.Fail()
		return nil
	}
	out := make([]Dim, n)
	for i := range out {
		switch DimKind(r.Byte()) {
		case DimUnset:
		case DimString:
			out[i] = Dim{Kind: DimString, Str: r.Text()}
		case DimOther:
			m, err := decodeAttributes(r.Bytes())
			if err != nil {
				r.Fail()
				return nil
			}
			val, found := m.Get("v")
			if !found {
				r.Fail()
				return nil
			}
			out[i] = Dim{Kind: DimOther, Other: val}
		default:
			r.Fail()
			return nil
		}
	}
	return out
}

// Run flags.
const (
	runFlagSpan = 1 << iota
)

// EncodeJob appends a job's entry to buf: the format byte, the number of
// runs, then per run its state, flags, the six timestamps, result, when it
// entered its list (Unix nanoseconds), its resource's key and its
// dimensions.
func EncodeJob(buf []byte, runs []Run) []byte {
	w := newWriter(buf)
	w.Byte(FormatV1)
	w.Uvarint(uint64(len(runs)))
	for i := range runs {
		r := &runs[i]
		w.Byte(byte(r.State))
		var flags byte
		if r.HasSpan {
			flags |= runFlagSpan
		}
		w.Byte(flags)
		w.ts(r.Start)
		w.ts(r.End)
		w.ts(r.LogStart)
		w.ts(r.LogEnd)
		w.ts(r.SpanStart)
		w.ts(r.SpanEnd)
		w.Text(r.Result)
		w.Varint(r.ListedAt.UnixNano())
		w.Text(r.Resource)
		w.dims(r.Dims)
	}
	return w.Encoded()
}

func decodeJob(v []byte, numDims int) ([]Run, error) {
	r := newReader(v)
	r.version()
	n := r.Uvarint()
	if r.Err() == nil && n > uint64(len(v)) {
		r.Fail()
	}
	var runs []Run
	for i := uint64(0); i < n && r.Err() == nil; i++ {
		var d Run
		d.State = runmemory.State(r.Byte())
		if d.State > runmemory.Ended {
			r.Fail()
		}
		flags := r.Byte()
		d.HasSpan = flags&runFlagSpan != 0
		d.Start, d.End = r.ts(), r.ts()
		d.LogStart, d.LogEnd = r.ts(), r.ts()
		d.SpanStart, d.SpanEnd = r.ts(), r.ts()
		d.Result = r.Text()
		d.ListedAt = time.Unix(0, r.Varint())
		d.Resource = r.Text()
		d.Dims = r.dims(numDims)
		runs = append(runs, d)
	}
	if err := r.Done(); err != nil {
		return nil, err
	}
	return runs, nil
}

// EncodeSeries appends a series' entry to buf: the format byte, family,
// the three label strings, the resource's key, dimensions, count, then the
// histogram: observations and, when there are any, sum, min, max and the
// bucket counts.
func EncodeSeries(buf []byte, s *Series) []byte {
	w := newWriter(buf)
	w.Byte(FormatV1)
	w.Byte(s.Family)
	w.Text(s.A)
	w.Text(s.B)
	w.Text(s.C)
	w.Text(s.Resource)
	w.dims(s.Dims)
	w.Varint(s.Count)
	w.Uvarint(s.Hist.N)
	if s.Hist.N > 0 {
		w.Float(s.Hist.Sum)
		w.Float(s.Hist.Min)
		w.Float(s.Hist.Max)
		w.Uvarints(s.Hist.Counts)
	}
	return w.Encoded()
}

// DecodeSeries reads a series entry that must fit l: its dimensions, its
// family one of l's, its buckets as many as the family's.
func DecodeSeries(v []byte, l *Layout) (*Series, error) {
	r := newReader(v)
	r.version()
	d := &Series{}
	d.Family = r.Byte()
	if r.Err() == nil && int(d.Family) >= len(l.Buckets) {
		r.Fail()
	}
	d.A, d.B, d.C = r.Text(), r.Text(), r.Text()
	d.Resource = r.Text()
	d.Dims = r.dims(l.Dims)
	d.Count = r.Varint()
	d.Hist.N = r.Uvarint()
	if d.Hist.N > 0 && r.Err() == nil {
		d.Hist.Sum, d.Hist.Min, d.Hist.Max = r.Float(), r.Float(), r.Float()
		n := r.Uvarint()
		if r.Err() == nil && n != uint64(l.Buckets[d.Family]) {
			r.Fail() // the bounds were reconfigured: the buckets cannot be kept
		}
		if r.Err() == nil {
			d.Hist.Counts = make([]uint64, n)
			for i := range d.Hist.Counts {
				d.Hist.Counts[i] = r.Uvarint()
			}
		}
	}
	if err := r.Done(); err != nil {
		return nil, err
	}
	return d, nil
}

// encodeMeta: the format byte and the start of cumulative series.
func encodeMeta(start pcommon.Timestamp) []byte {
	w := newWriter(nil)
	w.Byte(FormatV1)
	w.ts(start)
	return w.Encoded()
}

func decodeMeta(v []byte) (pcommon.Timestamp, error) {
	r := newReader(v)
	r.version()
	t := r.ts()
	return t, r.Done()
}
