// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"encoding/binary"
	"errors"
	"fmt"

	"go.opentelemetry.io/collector/extension/xextension/storage"

	"github.com/gpubuild/otelcol-gpubuild/internal/state/record"
)

// File layout: a header (magic and format version), then records. A record
// is the length of its body (uint32), the CRC-32C of the body (uint32) and
// the body: operations, each a type byte, the key's length (uvarint), the
// key, and for a set the value's length (uvarint) and the value.
const (
	magic      = "gpbj"
	version    = 1
	headerSize = record.HeaderSize
	recordHead = record.HeadSize
	opSet      = 1
	opDelete   = 2
)

// ErrUnknownFormat is the error of a journal written by a later version.
var ErrUnknownFormat = errors.New("journal written in an unknown format")

// wellFormed checks that body is a sequence of whole operations, so that a
// record is applied whole or not at all.
func wellFormed(body []byte) bool {
	for len(body) > 0 {
		_, _, _, rest, ok := parseOp(body)
		if !ok {
			return false
		}
		body = rest
	}
	return true
}

// readOp reads one operation of a well-formed body.
func readOp(body []byte) (key, value, rest []byte) {
	_, key, value, rest, _ = parseOp(body)
	return key, value, rest
}

// parseOp reads the operation b starts with; ok is false when b does not
// start with a whole operation of a known type.
func parseOp(b []byte) (typ byte, key, value, rest []byte, ok bool) {
	if len(b) == 0 || (b[0] != opSet && b[0] != opDelete) {
		return 0, nil, nil, nil, false
	}
	typ = b[0]
	key, rest, ok = readBytes(b[1:])
	if ok && typ == opSet {
		value, rest, ok = readBytes(rest)
	}
	return typ, key, value, rest, ok
}

func readBytes(b []byte) (v, rest []byte, ok bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, nil, false
	}
	return b[k : k+int(n)], b[k+int(n):], true
}

// append writes one record at the end of the whole records.
func (c *Client) append(ops []*storage.Operation) error {
	n := recordHead
	for _, op := range ops {
		n += 1 + uvarintLen(len(op.Key)) + len(op.Key)
		if op.Type == storage.Set {
			n += uvarintLen(len(op.Value)) + len(op.Value)
		}
	}
	b := c.buf[:0]
	if cap(b) < n {
		b = make([]byte, 0, n) // once, not grown by doubling: a record can be large
	}
	b = record.Begin(b)
	starts := c.opStarts[:0]
	for _, op := range ops {
		if c.indexing {
			starts = append(starts, c.size+int64(len(b)))
		}
		switch op.Type {
		case storage.Set:
			b = append(b, opSet)
			b = binary.AppendUvarint(b, uint64(len(op.Key)))
			b = append(b, op.Key...)
			b = binary.AppendUvarint(b, uint64(len(op.Value)))
			b = append(b, op.Value...)
		case storage.Delete:
			b = append(b, opDelete)
			b = binary.AppendUvarint(b, uint64(len(op.Key)))
			b = append(b, op.Key...)
		}
	}
	record.Seal(b, 0)
	c.buf = b
	if _, err := c.f.WriteAt(b, c.size); err != nil {
		// A torn record would hide the ones after it: cut it off.
		_ = c.f.Truncate(c.size)
		return fmt.Errorf("writing the journal %s: %w", c.path, err)
	}
	if c.fsync {
		if err := c.f.Sync(); err != nil {
			_ = c.f.Truncate(c.size)
			return fmt.Errorf("syncing the journal %s: %w", c.path, err)
		}
	}
	c.size += int64(len(b))
	if cap(c.buf) > keptBufferBytes {
		c.buf = nil // a large batch does not pin its buffer between batches
	}
	if c.indexing {
		c.note(ops, starts)
		c.opStarts = starts[:0]
	}
	return nil
}

func uvarintLen(n int) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], uint64(n))
}

// keptBufferBytes: a record buffer up to this size is kept for the next
// batch. The derivation's batches are a few KiB; the cumulative state's,
// every series of an export, some 70 bytes each, are not kept between
// exports.
const keptBufferBytes = 64 << 10
