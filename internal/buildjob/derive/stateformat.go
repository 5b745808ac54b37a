package derive

import (
	"encoding/binary"
	"errors"
	"hash/fnv"
	"math"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/gpubuild/otelcol-gpubuild/internal/buildjob/runmemory"
)

// The persisted derivation state, format version 1. Every value starts with
// the format byte; a value whose byte this version does not know, or which
// does not decode exactly to its end, is skipped with a counted reason.
// Documented in README.md next to this file; the fixtures are in
// testdata/state_v1/.
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
	stateFormatV1 = 1

	stateKeyMeta      = "meta"
	stateKeyResPrefix = "res/"
	stateKeyJobPrefix = "jobs/"
	// stateKeyJobPrefixUnordered is the job key of earlier versions, read
	// and rewritten under stateKeyJobPrefix at start.
	stateKeyJobPrefixUnordered = "job/"
	stateKeySeriesPrefix       = "counts/"
)

var (
	errUnknownVersion = errors.New("unknown format version")
	errTruncated      = errors.New("truncated or corrupted entry")
)

// stateWriter appends the fields of one entry.
type stateWriter struct{ b []byte }

func (w *stateWriter) byte1(v byte)     { w.b = append(w.b, v) }
func (w *stateWriter) uvarint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }
func (w *stateWriter) varint(v int64)   { w.b = binary.AppendVarint(w.b, v) }
func (w *stateWriter) float(v float64) {
	w.b = binary.LittleEndian.AppendUint64(w.b, math.Float64bits(v))
}
func (w *stateWriter) str(s string)           { w.uvarint(uint64(len(s))); w.b = append(w.b, s...) }
func (w *stateWriter) bytes(p []byte)         { w.uvarint(uint64(len(p))); w.b = append(w.b, p...) }
func (w *stateWriter) ts(t pcommon.Timestamp) { w.uvarint(uint64(t)) }

// stateReader reads the fields of one entry; the first error sticks.
type stateReader struct {
	b   []byte
	err error
}

func (r *stateReader) fail() { r.err = errTruncated; r.b = nil }

func (r *stateReader) byte1() byte {
	if r.err != nil || len(r.b) < 1 {
		r.fail()
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *stateReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *stateReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *stateReader) float() float64 {
	if r.err != nil || len(r.b) < 8 {
		r.fail()
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(r.b))
	r.b = r.b[8:]
	return v
}

func (r *stateReader) raw() []byte {
	n := r.uvarint()
	if r.err != nil || uint64(len(r.b)) < n {
		r.fail()
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *stateReader) str() string           { return string(r.raw()) }
func (r *stateReader) ts() pcommon.Timestamp { return pcommon.Timestamp(r.uvarint()) }

// version checks the format byte.
func (r *stateReader) version() {
	if v := r.byte1(); r.err == nil && v != stateFormatV1 {
		r.err = errUnknownVersion
	}
}

// done reports the first error, or errTruncated when bytes are left over.
func (r *stateReader) done() error {
	if r.err == nil && len(r.b) != 0 {
		return errTruncated
	}
	return r.err
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

// resourceStateKey names the entry holding attrs' encoding.
func resourceStateKey(encoded []byte) string {
	h := fnv.New64a()
	_, _ = h.Write(encoded)
	return stateKeyResPrefix + strconv.FormatUint(h.Sum64()|1<<63, 16)[:16]
}

func encodeResource(encoded []byte) []byte {
	w := stateWriter{b: make([]byte, 0, len(encoded)+4)}
	w.byte1(stateFormatV1)
	w.bytes(encoded)
	return w.b
}

func decodeResource(v []byte) (pcommon.Map, error) {
	r := stateReader{b: v}
	r.version()
	b := r.raw()
	if err := r.done(); err != nil {
		return pcommon.Map{}, err
	}
	return decodeAttributes(b)
}

// jobStateKey is the key of a job's entry. The sequence number leads so
// that new jobs land at the end of the store's B+tree: with job ids that
// are hashes, keys in id order made every write rewrite pages all over
// the file (about 65 pages per request at 2000 spans/s, against 2 or 3).
func jobStateKey(seq uint64, k runmemory.Key) string {
	return stateKeyJobPrefix + strconv.FormatUint(seq|1<<63, 16)[:16] + "/" + k.Service + "\x00" + k.JobID
}

// parseJobStateKey reads a job key of this version (seq > 0) or of an
// earlier one (seq 0).
func parseJobStateKey(key string) (seq uint64, k runmemory.Key, ok bool) {
	var rest string
	if rest, ok = strings.CutPrefix(key, stateKeyJobPrefix); ok {
		if len(rest) < 17 || rest[16] != '/' {
			return 0, k, false
		}
		v, err := strconv.ParseUint(rest[:16], 16, 64)
		if err != nil || v&^(1<<63) == 0 {
			return 0, k, false
		}
		seq, rest = v&^(1<<63), rest[17:]
	} else if rest, ok = strings.CutPrefix(key, stateKeyJobPrefixUnordered); !ok {
		return 0, k, false
	}
	service, id, ok := strings.Cut(rest, "\x00")
	return seq, runmemory.Key{Service: service, JobID: id}, ok
}

func seriesStateKey(id uint64) string {
	return stateKeySeriesPrefix + strconv.FormatUint(id|1<<63, 16)[:16]
}

func parseSeriesStateKey(key string) (uint64, bool) {
	rest, ok := strings.CutPrefix(key, stateKeySeriesPrefix)
	if !ok || len(rest) != 16 {
		return 0, false
	}
	v, err := strconv.ParseUint(rest, 16, 64)
	return v &^ (1 << 63), err == nil
}

// dims: count, then per dimension its kind and, for a string, the string;
// for another type, the value as the "v" attribute of an encoded map.
func (w *stateWriter) dims(dims []dimValue) {
	w.uvarint(uint64(len(dims)))
	for _, d := range dims {
		w.byte1(byte(d.kind))
		switch d.kind {
		case dimString:
			w.str(d.str)
		case dimOther:
			m := pcommon.NewMap()
			d.other.CopyTo(m.PutEmpty("v"))
			w.bytes(encodeAttributes(m))
		}
	}
}

func (r *stateReader) dims(want int) []dimValue {
	n := r.uvarint()
	if r.err != nil || n != uint64(want) {
		r.fail()
		return nil
	}
	out := make([]dimValue, n)
	for i := range out {
		switch dimKind(r.byte1()) {
		case dimUnset:
		case dimString:
			out[i] = dimValue{kind: dimString, str: r.str()}
		case dimOther:
			m, err := decodeAttributes(r.raw())
			v, ok := m, err == nil
			if !ok {
				r.fail()
				return nil
			}
			val, found := v.Get("v")
			if !found {
				r.fail()
				return nil
			}
			out[i] = dimValue{kind: dimOther, other: val}
		default:
			r.fail()
			return nil
		}
	}
	return out
}

// Run flags.
const (
	runFlagSpan = 1 << iota
)

// encodeJob: the format byte, the number of runs, then per run its state,
// flags, the six timestamps, result, when it entered its list (Unix
// nanoseconds), its resource's key and its dimensions.
func encodeJob(buf []byte, runs []*runmemory.Run[runPayload], resKey func(*resourceEntry) string) []byte {
	w := stateWriter{b: buf}
	w.byte1(stateFormatV1)
	w.uvarint(uint64(len(runs)))
	for _, r := range runs {
		w.byte1(byte(r.State))
		var flags byte
		if r.HasSpan {
			flags |= runFlagSpan
		}
		w.byte1(flags)
		w.ts(r.Start)
		w.ts(r.End)
		w.ts(r.LogStart)
		w.ts(r.LogEnd)
		w.ts(r.SpanStart)
		w.ts(r.SpanEnd)
		w.str(r.Result)
		w.varint(r.ListedAt.UnixNano())
		w.str(resKey(r.Payload.res))
		w.dims(r.Payload.dims)
	}
	return w.b
}

// decodedRun is a run as read, before its resource is resolved.
type decodedRun struct {
	runmemory.Run[runPayload]
	listedAtNanos int64
	resKey        string
}

func decodeJob(v []byte, numDims int) ([]decodedRun, error) {
	r := stateReader{b: v}
	r.version()
	n := r.uvarint()
	if r.err == nil && n > uint64(len(v)) {
		r.fail()
	}
	var runs []decodedRun
	for i := uint64(0); i < n && r.err == nil; i++ {
		var d decodedRun
		d.State = runmemory.State(r.byte1())
		if d.State > runmemory.Ended {
			r.fail()
		}
		flags := r.byte1()
		d.HasSpan = flags&runFlagSpan != 0
		d.Start, d.End = r.ts(), r.ts()
		d.LogStart, d.LogEnd = r.ts(), r.ts()
		d.SpanStart, d.SpanEnd = r.ts(), r.ts()
		d.Result = r.str()
		d.listedAtNanos = r.varint()
		d.resKey = r.str()
		d.Payload.dims = r.dims(numDims)
		runs = append(runs, d)
	}
	if err := r.done(); err != nil {
		return nil, err
	}
	return runs, nil
}

// encodeSeries: the format byte, family, the three label strings, the
// resource's key, dimensions, count, then the histogram: observations and,
// when there are any, sum, min, max and the bucket counts.
func encodeSeries(buf []byte, s *series, resKey string) []byte {
	w := stateWriter{b: buf}
	w.byte1(stateFormatV1)
	w.byte1(byte(s.labels.fam))
	w.str(s.labels.a)
	w.str(s.labels.b)
	w.str(s.labels.c)
	w.str(resKey)
	w.dims(s.labels.dims)
	w.varint(s.count)
	w.uvarint(s.hist.n)
	if s.hist.n > 0 {
		w.float(s.hist.sum)
		w.float(s.hist.min)
		w.float(s.hist.max)
		w.uvarint(uint64(len(s.hist.counts)))
		for _, c := range s.hist.counts {
			w.uvarint(c)
		}
	}
	return w.b
}

// decodedSeries is a series as read, before its resource is resolved.
type decodedSeries struct {
	series
	resKey string
}

func decodeSeries(v []byte, numDims int, bounds [numFamilies][]float64) (*decodedSeries, error) {
	r := stateReader{b: v}
	r.version()
	d := &decodedSeries{}
	d.labels.fam = family(r.byte1())
	if r.err == nil && d.labels.fam >= numFamilies {
		r.fail()
	}
	d.labels.a, d.labels.b, d.labels.c = r.str(), r.str(), r.str()
	d.resKey = r.str()
	d.labels.dims = r.dims(numDims)
	d.count = r.varint()
	if r.err == nil {
		d.hist.bounds = bounds[d.labels.fam]
	}
	d.hist.n = r.uvarint()
	if d.hist.n > 0 && r.err == nil {
		d.hist.sum, d.hist.min, d.hist.max = r.float(), r.float(), r.float()
		n := r.uvarint()
		if r.err == nil && n != uint64(len(d.hist.bounds)+1) {
			r.fail() // the bounds were reconfigured: the buckets cannot be kept
		}
		if r.err == nil {
			d.hist.counts = make([]uint64, n)
			for i := range d.hist.counts {
				d.hist.counts[i] = r.uvarint()
			}
		}
	}
	if err := r.done(); err != nil {
		return nil, err
	}
	return d, nil
}

// encodeMeta: the format byte and the start of cumulative series.
func encodeMeta(start pcommon.Timestamp) []byte {
	w := stateWriter{}
	w.byte1(stateFormatV1)
	w.ts(start)
	return w.b
}

func decodeMeta(v []byte) (pcommon.Timestamp, error) {
	r := stateReader{b: v}
	r.version()
	t := r.ts()
	return t, r.done()
}
