// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"context"
	"errors"
	"io"
	"os"
	"unsafe"

	"github.com/gpubuild/otelcol-gpubuild/internal/state/record"
)

// replay applies what the file holds and leaves it with a header only.
func (c *Client) replay(ctx context.Context) (Replay, error) {
	st, err := c.f.Stat()
	if err != nil {
		return Replay{}, err
	}
	var r Replay
	if st.Size() > 0 {
		records, valid, formatErr, err := c.apply(ctx, st.Size())
		r.Records, r.DiscardedBytes, r.Err = records, st.Size()-valid, formatErr
		if err != nil {
			return r, err
		}
		if errors.Is(formatErr, ErrUnknownFormat) {
			// Keep the file for the version that wrote it.
			if err := os.Rename(c.path, c.path+".unknown-format"); err != nil {
				return r, err
			}
			f, err := os.OpenFile(c.path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
			if err != nil {
				return r, err
			}
			_ = c.f.Close()
			c.f = f
		}
	}
	if err := c.reset(); err != nil {
		return r, err
	}
	return r, nil
}

// reset empties the file down to its header: the records are cut off
// behind the header, which is then written again (a file set aside, or
// new, has none). Should the cut fail, the file and size are as they were
// (its records are applied again, to the same effect); once it is done,
// size follows it, so that whatever fails next, the next record is
// written right behind the header and not past a hole.
func (c *Client) reset() error {
	if err := c.f.Truncate(headerSize); err != nil {
		return err
	}
	c.size = headerSize
	_, err := c.f.WriteAt(record.AppendHeader(nil, magic, version), 0)
	return err
}

// apply reads the journal's first size bytes and writes the net effect of
// its whole records into the storage: each key's last operation only, in
// transactions of at most chunkBytes (writeLast). A state rewritten by
// every batch (the same keys in every record) thus reaches the storage once
// per checkpoint, not once per record. It returns how many records it
// found and the bytes they and the header take; formatErr when the header
// is damaged or of a later version (nothing is applied), err when the
// storage refused a chunk.
func (c *Client) apply(ctx context.Context, size int64) (records int, valid int64, formatErr, err error) {
	var head [headerSize]byte
	if _, err := c.f.ReadAt(head[:], 0); err != nil {
		return 0, 0, errors.New("journal header damaged"), nil
	}
	switch err := record.CheckHeader(head[:], magic, version); {
	case errors.Is(err, record.ErrUnknownVersion):
		return 0, 0, ErrUnknownFormat, nil
	case err != nil:
		return 0, 0, errors.New("journal header damaged"), nil
	}
	valid = headerSize
	var body []byte
	for {
		seg := c.scan(valid, size, &body)
		if seg.records == 0 {
			break
		}
		if err := c.writeLast(ctx, &seg.last, seg.end); err != nil {
			return records, valid, nil, err
		}
		records += seg.records
		valid = seg.end
		if !seg.more {
			break
		}
	}
	return records, valid, nil, nil
}

// segment is a run of whole records and, for each key, the offset of its
// last operation in them.
type segment struct {
	last    keyIndex
	records int
	end     int64 // where the segment's records end
	more    bool  // whole records follow (the index was full)
}

// records calls fn with each whole record body from offset from on, up to
// size, and the offset of the body, until fn returns false; it returns
// where the last whole record read ends. A record that is incomplete or
// fails its checksum ends the reading: it and anything after it are not
// the journal's.
func (c *Client) records(from, size int64, body *[]byte, fn func(off int64, body []byte) bool) int64 {
	r := record.NewReader(io.NewSectionReader(c.f, from, size-from), size-from, size, int(min(size-from, 32<<10)))
	r.Reuse(*body)
	defer func() { *body = r.Buffer() }()
	for {
		end := from + r.Read
		b, ok := r.Next()
		if !ok || !wellFormed(b) || !fn(end+recordHead, b) {
			return end
		}
	}
}

// scan indexes the last operation of each key in the whole records from
// offset from on, until the index holds maxIndexKeys keys (it may pass
// that by one record's keys) or its keys' bytes would pass what it can
// hold (a record's keys are at most its length, which fits).
func (c *Client) scan(from, size int64, body *[]byte) segment {
	seg := segment{last: newKeyIndex()}
	seg.end = c.records(from, size, body, func(off int64, b []byte) bool {
		if seg.records > 0 && (seg.last.len() >= c.maxIndexKeys || !seg.last.room(len(b))) {
			seg.more = true
			return false
		}
		for rest := b; len(rest) > 0; {
			key, _, next := readOp(rest)
			seg.last.set(unsafe.String(unsafe.SliceData(key), len(key)), off+int64(len(b)-len(rest)))
			rest = next
		}
		seg.records++
		return true
	})
	return seg
}
