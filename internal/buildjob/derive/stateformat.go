// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derive

import (
	"errors"
	"hash/fnv"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/gpubuild/otelcol-gpubuild/internal/buildjob/runmemory"
	"github.com/gpubuild/otelcol-gpubuild/internal/state/encoding"
)

// The persisted derivation state, format version 1. Every value starts with
// the format byte; a value whose byte this version does not know, or which
// does not decode exactly to its end, is skipped with a counted reason. The
// fields are encoded by internal/encoding.
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

// stateWriter appends the fields of one entry (internal/state/encoding).
type stateWriter struct{ encoding.Writer }

func newStateWriter(buf []byte) stateWriter { return stateWriter{encoding.NewWriter(buf)} }

func (w *stateWriter) ts(t pcommon.Timestamp) { w.Uvarint(uint64(t)) }

// stateReader reads the fields of one entry; the first error sticks.
type stateReader struct{ encoding.Reader }

func newStateReader(b []byte) stateReader { return stateReader{encoding.NewReader(b, errTruncated)} }

func (r *stateReader) ts() pcommon.Timestamp { return pcommon.Timestamp(r.Uvarint()) }

// version checks the format byte.
func (r *stateReader) version() {
	if v := r.Byte(); r.Err() == nil && v != stateFormatV1 {
		r.FailWith(errUnknownVersion)
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

// resourceStateKey names the entry holding attrs' encoding.
func resourceStateKey(encoded []byte) string {
	h := fnv.New64a()
	_, _ = h.Write(encoded)
	return stateKeyResPrefix + strconv.FormatUint(h.Sum64()|1<<63, 16)[:16]
}

func encodeResource(encoded []byte) []byte {
	w := newStateWriter(make([]byte, 0, len(encoded)+4))
	w.Byte(stateFormatV1)
	w.Bytes(encoded)
	return w.Encoded()
}

func decodeResource(v []byte) (pcommon.Map, error) {
	r := newStateReader(v)
	r.version()
	b := r.Bytes()
	if err := r.Done(); err != nil {
		return pcommon.Map{}, err
	}
	return decodeAttributes(b)
}

// jobStateKey is the key of a job's entry. The sequence number leads so
// that new jobs land at the end of the store's B+tree: with job ids that
// are hashes, keys in id order made every write rewrite pages all over
// the file (about 65 pages per request at 2000 spans/s, against 2 or 3).
func jobStateKey(seq uint64, k runmemory.Key) string {
	return string(appendJobStateKey(nil, seq, k))
}

// appendJobStateKey appends jobStateKey(seq, k) to b: with the top bit
// set, seq is always 16 hexadecimal digits.
func appendJobStateKey(b []byte, seq uint64, k runmemory.Key) []byte {
	b = append(b, stateKeyJobPrefix...)
	b = strconv.AppendUint(b, seq|1<<63, 16)
	b = append(b, '/')
	b = append(b, k.Service...)
	b = append(b, 0)
	return append(b, k.JobID...)
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
	w.Uvarint(uint64(len(dims)))
	for _, d := range dims {
		w.Byte(byte(d.kind))
		switch d.kind {
		case dimString:
			w.Text(d.str)
		case dimOther:
			m := pcommon.NewMap()
			d.other.CopyTo(m.PutEmpty("v"))
			w.Bytes(encodeAttributes(m))
		}
	}
}

func (r *stateReader) dims(want int) []dimValue {
	n := r.Uvarint()
	if r.Err() != nil || n != uint64(want) {
		r.Fail()
		return nil
	}
	out := make([]dimValue, n)
	for i := range out {
		switch dimKind(r.Byte()) {
		case dimUnset:
		case dimString:
			out[i] = dimValue{kind: dimString, str: r.Text()}
		case dimOther:
			m, err := decodeAttributes(r.Bytes())
			v, ok := m, err == nil
			if !ok {
				r.Fail()
				return nil
			}
			val, found := v.Get("v")
			if !found {
				r.Fail()
				return nil
			}
			out[i] = dimValue{kind: dimOther, other: val}
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

// encodeJob: the format byte, the number of runs, then per run its state,
// flags, the six timestamps, result, when it entered its list (Unix
// nanoseconds), its resource's key and its dimensions.
func encodeJob(buf []byte, runs []*runmemory.Run[runPayload], resKey func(*resourceEntry) string) []byte {
	w := newStateWriter(buf)
	w.Byte(stateFormatV1)
	w.Uvarint(uint64(len(runs)))
	for _, r := range runs {
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
		w.Text(resKey(r.Payload.res))
		w.dims(r.Payload.dims)
	}
	return w.Encoded()
}

// decodedRun is a run as read, before its resource is resolved.
type decodedRun struct {
	runmemory.Run[runPayload]
	listedAtNanos int64
	resKey        string
}

func decodeJob(v []byte, numDims int) ([]decodedRun, error) {
	r := newStateReader(v)
	r.version()
	n := r.Uvarint()
	if r.Err() == nil && n > uint64(len(v)) {
		r.Fail()
	}
	var runs []decodedRun
	for i := uint64(0); i < n && r.Err() == nil; i++ {
		var d decodedRun
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
		d.listedAtNanos = r.Varint()
		d.resKey = r.Text()
		d.Payload.dims = r.dims(numDims)
		runs = append(runs, d)
	}
	if err := r.Done(); err != nil {
		return nil, err
	}
	return runs, nil
}

// encodeSeries: the format byte, family, the three label strings, the
// resource's key, dimensions, count, then the histogram: observations and,
// when there are any, sum, min, max and the bucket counts.
func encodeSeries(buf []byte, s *series, resKey string) []byte {
	w := newStateWriter(buf)
	w.Byte(stateFormatV1)
	w.Byte(byte(s.labels.fam))
	w.Text(s.labels.a)
	w.Text(s.labels.b)
	w.Text(s.labels.c)
	w.Text(resKey)
	w.dims(s.labels.dims)
	w.Varint(s.count)
	w.Uvarint(s.hist.n)
	if s.hist.n > 0 {
		w.Float(s.hist.sum)
		w.Float(s.hist.min)
		w.Float(s.hist.max)
		w.Uvarints(s.hist.counts)
	}
	return w.Encoded()
}

// decodedSeries is a series as read, before its resource is resolved.
type decodedSeries struct {
	series
	resKey string
}

func decodeSeries(v []byte, numDims int, bounds [numFamilies][]float64) (*decodedSeries, error) {
	r := newStateReader(v)
	r.version()
	d := &decodedSeries{}
	d.labels.fam = family(r.Byte())
	if r.Err() == nil && d.labels.fam >= numFamilies {
		r.Fail()
	}
	d.labels.a, d.labels.b, d.labels.c = r.Text(), r.Text(), r.Text()
	d.resKey = r.Text()
	d.labels.dims = r.dims(numDims)
	d.count = r.Varint()
	if r.Err() == nil {
		d.hist.bounds = bounds[d.labels.fam]
	}
	d.hist.n = r.Uvarint()
	if d.hist.n > 0 && r.Err() == nil {
		d.hist.sum, d.hist.min, d.hist.max = r.Float(), r.Float(), r.Float()
		n := r.Uvarint()
		if r.Err() == nil && n != uint64(len(d.hist.bounds)+1) {
			r.Fail() // the bounds were reconfigured: the buckets cannot be kept
		}
		if r.Err() == nil {
			d.hist.counts = make([]uint64, n)
			for i := range d.hist.counts {
				d.hist.counts[i] = r.Uvarint()
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
	w := newStateWriter(nil)
	w.Byte(stateFormatV1)
	w.ts(start)
	return w.Encoded()
}

func decodeMeta(v []byte) (pcommon.Timestamp, error) {
	r := newStateReader(v)
	r.version()
	t := r.ts()
	return t, r.Done()
}
