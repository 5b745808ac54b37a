// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package receipts is the gateway's journal of received requests: each
// request is appended, with one write, to the segment of the interval it
// was merged into before it is acknowledged; a segment is removed once its
// interval was handed to the exporter's queue. What a killed gateway
// acknowledged but did not hand on is in the segments it left, and is read
// back at the next start.
package receipts // import "github.com/gpubuild/otelcol-gpubuild/processor/intervalmergeprocessor/internal/receipts"

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/gpubuild/otelcol-gpubuild/internal/requestid"
	"github.com/gpubuild/otelcol-gpubuild/internal/state/record"
)

// File layout: a header (magic and format version, 8 bytes), then records:
// the body's length (uint32 LE), the CRC-32C of the body (uint32 LE) and the
// body: a flags byte (1: the request has an identity), the instance id
// (uvarint length and bytes) and the sequence number (uvarint) when it has
// one, then the request's metrics as OTLP protobuf.
const (
	magic      = "gpim"
	version    = 1
	headerSize = record.HeaderSize
	recordHead = record.HeadSize
	flagID     = 1
	// maxRecord bounds a record's body (a request is at most a few MiB).
	maxRecord = 256 << 20
)

// ErrUnknownFormat is the error of a segment written by a later version.
var ErrUnknownFormat = errors.New("receipt journal written in an unknown format")

// Segment is one interval's file.
type Segment struct {
	Number uint64
	Path   string
	Bytes  int64
}

// Journal appends records to the open segment. Not safe for concurrent use.
type Journal struct {
	dir, prefix string
	fsync       bool
	f           *os.File
	seg         Segment
	records     int
	buf         []byte
}

// segmentName: prefix, "_", the segment number in 20 digits (names sort in
// number order).
func segmentName(prefix string, n uint64) string {
	return fmt.Sprintf("%s_%020d", prefix, n)
}

// Open lists the segments a previous process left in dir (oldest first) and
// opens a new one after them.
func Open(dir, prefix string, fsync bool) (*Journal, []Segment, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, nil, err
	}
	left, err := List(dir, prefix)
	if err != nil {
		return nil, nil, err
	}
	j := &Journal{dir: dir, prefix: prefix, fsync: fsync}
	next := uint64(1)
	if len(left) > 0 {
		next = left[len(left)-1].Number + 1
	}
	if err := j.create(next); err != nil {
		return nil, nil, err
	}
	return j, left, nil
}

// List returns the segments in dir, oldest first.
func List(dir, prefix string) ([]Segment, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []Segment
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix+"_")
		if !ok || len(rest) != 20 || !e.Type().IsRegular() {
			continue
		}
		n, err := strconv.ParseUint(rest, 10, 64)
		if err != nil {
			continue
		}
		seg := Segment{Number: n, Path: filepath.Join(dir, e.Name())}
		if info, err := e.Info(); err == nil {
			seg.Bytes = info.Size()
		}
		out = append(out, seg)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Number < out[b].Number })
	return out, nil
}

func (j *Journal) create(n uint64) error {
	path := filepath.Join(j.dir, segmentName(j.prefix, n))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(record.AppendHeader(nil, magic, version)); err != nil {
		_ = f.Close()
		_ = os.Remove(path)
		return err
	}
	j.f, j.seg, j.records = f, Segment{Number: n, Path: path, Bytes: headerSize}, 0
	return nil
}

// Bytes is the size of the open segment.
func (j *Journal) Bytes() int64 { return j.seg.Bytes }

// Append writes one request as one record. On failure nothing of it stays
// in the segment (a torn record would hide the ones after it).
func (j *Journal) Append(id requestid.ID, hasID bool, metrics []byte) error {
	b := record.Begin(j.buf[:0])
	if hasID {
		b = append(b, flagID)
		b = binary.AppendUvarint(b, uint64(len(id.Instance)))
		b = append(b, id.Instance...)
		b = binary.AppendUvarint(b, id.Sequence)
	} else {
		b = append(b, 0)
	}
	b = append(b, metrics...)
	record.Seal(b, 0)
	if cap(b) <= 1<<20 {
		j.buf = b
	}
	if _, err := j.f.WriteAt(b, j.seg.Bytes); err != nil {
		_ = j.f.Truncate(j.seg.Bytes)
		return fmt.Errorf("writing the receipt journal %s: %w", j.seg.Path, err)
	}
	if j.fsync {
		if err := j.f.Sync(); err != nil {
			_ = j.f.Truncate(j.seg.Bytes)
			return fmt.Errorf("syncing the receipt journal %s: %w", j.seg.Path, err)
		}
	}
	j.seg.Bytes += int64(len(b))
	j.records++
	return nil
}

// Probe reports whether the journal's directory takes a write of n bytes
// now (after a failed Append: the disk full, or its quota), by writing
// them to a file of its own and removing it; the segments are not touched.
func (j *Journal) Probe(n int) error {
	path := filepath.Join(j.dir, j.prefix+".probe")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(make([]byte, n))
	if err == nil && j.fsync {
		err = f.Sync()
	}
	return errors.Join(err, f.Close(), os.Remove(path))
}

// Rotate closes the open segment and opens the next; it returns the closed
// one. When the open segment holds no record nothing changes and ok is
// false. When the next cannot be created the open segment stays open.
func (j *Journal) Rotate() (closed Segment, ok bool, err error) {
	if j.records == 0 {
		return Segment{}, false, nil
	}
	old, oldSeg := j.f, j.seg
	if err := j.create(oldSeg.Number + 1); err != nil {
		return Segment{}, false, fmt.Errorf("opening the next receipt journal segment in %s: %w", j.dir, err)
	}
	_ = old.Close()
	return oldSeg, true, nil
}

// Close closes the open segment, removing it when it holds no record.
func (j *Journal) Close() error {
	err := j.f.Close()
	if j.records == 0 {
		return errors.Join(err, os.Remove(j.seg.Path))
	}
	return err
}

// Read calls fn with each whole record of the segment at path. A record
// that is incomplete or fails its checksum ends the reading (a write cut
// short by a crash or a full disk, never acknowledged): discarded says how
// many bytes followed the last whole record. fn's error stops the reading
// and is returned.
func Read(path string, fn func(id requestid.ID, hasID bool, metrics []byte) error) (records int, discarded int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return 0, 0, err
	}
	size := st.Size()
	var h [headerSize]byte
	if _, err := io.ReadFull(f, h[:]); err != nil {
		return 0, size, nil // not even a header: nothing was acknowledged from it
	}
	switch err := record.CheckHeader(h[:], magic, version); {
	case errors.Is(err, record.ErrUnknownVersion):
		return 0, 0, ErrUnknownFormat
	case err != nil:
		return 0, size, nil
	}
	r := record.NewReader(f, size-headerSize, maxRecord, 64<<10)
	for {
		pos := headerSize + r.Read
		b, ok := r.Next()
		if !ok || len(b) == 0 {
			return records, size - pos, nil
		}
		id, hasID, metrics, ok := decode(b)
		if !ok {
			return records, size - pos, nil
		}
		if err := fn(id, hasID, metrics); err != nil {
			return records, 0, err
		}
		records++
	}
}

func decode(b []byte) (id requestid.ID, hasID bool, metrics []byte, ok bool) {
	switch b[0] {
	case 0:
		return id, false, b[1:], true
	case flagID:
	default:
		return id, false, nil, false
	}
	b = b[1:]
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return id, false, nil, false
	}
	id.Instance = string(b[k : k+int(n)])
	b = b[k+int(n):]
	seq, k := binary.Uvarint(b)
	if k <= 0 {
		return id, false, nil, false
	}
	id.Sequence = seq
	return id, true, b[k:], true
}
