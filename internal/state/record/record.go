// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package record is the one framing of every file the distribution keeps
// state in: a header (four magic bytes naming the format and its version,
// uint32 little-endian), then either records — each the length of its body
// (uint32 LE), the CRC-32C of the body (uint32 LE) and the body — or, for a
// snapshot written whole, one body followed by its CRC-32C.
//
// A record is written with one write and read back whole or not at all: a
// record cut short by a crash or a full disk, or one that fails its
// checksum, ends the reading, and it and what follows were never
// acknowledged. What a body holds is the format of the package that writes
// it (internal/state/journal, the gateway's receipts and identities).
package record // import "github.com/gpubuild/otelcol-gpubuild/internal/state/record"

import (
	"bufio"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
)

// HeaderSize is the bytes of a file's header; HeadSize those before each
// record's body.
const (
	HeaderSize = 8
	HeadSize   = 8
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var (
	// ErrNoHeader is the error of a file that does not start with the format's magic (it is
	// empty, damaged, or of another format).
	ErrNoHeader = errors.New("no header of this format")
	// ErrUnknownVersion is the error of a file written by a later version.
	ErrUnknownVersion = errors.New("written in an unknown format version")
	// ErrDamaged is the error of a snapshot whose checksum or length does not hold.
	ErrDamaged = errors.New("damaged")
)

// AppendHeader appends a file's header: magic (four bytes) and version.
func AppendHeader(b []byte, magic string, version uint32) []byte {
	b = append(b, magic[:4]...)
	return binary.LittleEndian.AppendUint32(b, version)
}

// CheckHeader checks the first HeaderSize bytes of a file.
func CheckHeader(h []byte, magic string, version uint32) error {
	if len(h) < HeaderSize || string(h[:4]) != magic[:4] {
		return ErrNoHeader
	}
	if binary.LittleEndian.Uint32(h[4:HeaderSize]) != version {
		return ErrUnknownVersion
	}
	return nil
}

// Begin appends the room for a record's head to b; the body follows it,
// and Seal fills the head in once the body is written.
func Begin(b []byte) []byte {
	var head [HeadSize]byte
	return append(b, head[:]...)
}

// Seal writes the head of the record that starts at b[start] (where Begin
// was called): the length and checksum of everything after its head.
func Seal(b []byte, start int) {
	body := b[start+HeadSize:]
	binary.LittleEndian.PutUint32(b[start:], uint32(len(body))) //nolint:gosec // bodies are bounded far below 4 GiB by their writers
	binary.LittleEndian.PutUint32(b[start+4:], crc32.Checksum(body, castagnoli))
}

// Reader reads the whole records of a file after its header.
type Reader struct {
	r       *bufio.Reader
	left    int64 // bytes not yet read
	maxBody int64
	body    []byte
	// Read is the bytes of whole records read so far.
	Read int64
}

// NewReader reads records from r, which holds size bytes after the
// header; a body longer than maxBody ends the reading as damage would.
// bufSize is the read buffer's size.
func NewReader(r io.Reader, size, maxBody int64, bufSize int) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, bufSize), left: size, maxBody: maxBody}
}

// Next returns the next record's body, valid until the next call, or false
// at the end of the whole records.
func (r *Reader) Next() ([]byte, bool) {
	var head [HeadSize]byte
	if _, err := io.ReadFull(r.r, head[:]); err != nil {
		return nil, false
	}
	n := int64(binary.LittleEndian.Uint32(head[:]))
	if n > r.maxBody || n > r.left-HeadSize {
		return nil, false
	}
	if int64(cap(r.body)) < n {
		r.body = make([]byte, n)
	}
	b := r.body[:n]
	if _, err := io.ReadFull(r.r, b); err != nil || crc32.Checksum(b, castagnoli) != binary.LittleEndian.Uint32(head[4:]) {
		return nil, false
	}
	r.left -= HeadSize + n
	r.Read += HeadSize + n
	return b, true
}

// SealSnapshot appends the checksum of b[start:] (a snapshot's body,
// written after its header) to b.
func SealSnapshot(b []byte, start int) []byte {
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[start:], castagnoli))
}

// OpenSnapshot checks a snapshot written as AppendHeader, the body and
// SealSnapshot, and returns its body.
func OpenSnapshot(b []byte, magic string, version uint32) ([]byte, error) {
	if len(b) < HeaderSize+4 {
		return nil, ErrDamaged
	}
	if err := CheckHeader(b, magic, version); err != nil {
		if errors.Is(err, ErrNoHeader) {
			return nil, ErrDamaged
		}
		return nil, err
	}
	body := b[HeaderSize : len(b)-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return nil, ErrDamaged
	}
	return body, nil
}

// Reuse hands the reader a buffer for the bodies it reads (one a previous
// reader grew); Buffer returns the one it has now.
func (r *Reader) Reuse(buf []byte) { r.body = buf }

// Buffer is the reader's body buffer, for the next reader's Reuse.
func (r *Reader) Buffer() []byte { return r.body }
