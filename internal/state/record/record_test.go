// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package record

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// file writes a file of the format "test" version 3 by hand, as the package
// documentation lays it out: the header, then per body its length, its
// CRC-32C and the body.
func file(bodies ...string) []byte {
	b := []byte("test\x03\x00\x00\x00")
	for _, body := range bodies {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(body)))
		b = binary.LittleEndian.AppendUint32(b, crc32.Checksum([]byte(body), crc32.MakeTable(crc32.Castagnoli)))
		b = append(b, body...)
	}
	return b
}

func read(t *testing.T, f []byte, maxBody int64) (bodies []string, read int64) {
	t.Helper()
	require.NoError(t, CheckHeader(f, "test", 3))
	r := NewReader(bytes.NewReader(f[HeaderSize:]), int64(len(f)-HeaderSize), maxBody, 16)
	for {
		b, ok := r.Next()
		if !ok {
			return bodies, r.Read
		}
		bodies = append(bodies, string(b))
	}
}

func TestWriterMatchesTheLayout(t *testing.T) {
	b := AppendHeader(nil, "test", 3)
	for _, body := range []string{"one", "", "three"} {
		start := len(b)
		b = Begin(b)
		b = append(b, body...)
		Seal(b, start)
	}
	assert.Equal(t, file("one", "", "three"), b)
}

func TestReaderStopsAtTheFirstRecordNotWhole(t *testing.T) {
	whole := file("one", "two", "three")
	bodies, n := read(t, whole, 1<<20)
	assert.Equal(t, []string{"one", "two", "three"}, bodies)
	assert.Equal(t, int64(len(whole)-HeaderSize), n)

	// Torn anywhere in the last record: the first two stand.
	two := int64(len(file("one", "two")) - HeaderSize)
	for cut := len(file("one", "two")); cut < len(whole); cut++ {
		bodies, n := read(t, whole[:cut], 1<<20)
		assert.Equal(t, []string{"one", "two"}, bodies, "cut at %d", cut)
		assert.Equal(t, two, n)
	}
	// A flipped bit in the second body ends the reading before it.
	bad := bytes.Clone(whole)
	bad[len(file("one"))+HeadSize] ^= 1
	bodies, _ = read(t, bad, 1<<20)
	assert.Equal(t, []string{"one"}, bodies)
	// A body longer than the bound is damage too.
	bodies, _ = read(t, whole, 4)
	assert.Equal(t, []string{"one", "two"}, bodies)
}

func TestHeader(t *testing.T) {
	assert.NoError(t, CheckHeader([]byte("test\x03\x00\x00\x00"), "test", 3))
	assert.ErrorIs(t, CheckHeader([]byte("test\x04\x00\x00\x00"), "test", 3), ErrUnknownVersion)
	assert.ErrorIs(t, CheckHeader([]byte("tesx\x03\x00\x00\x00"), "test", 3), ErrNoHeader)
	assert.ErrorIs(t, CheckHeader([]byte("test\x03"), "test", 3), ErrNoHeader)
}

func TestSnapshot(t *testing.T) {
	b := AppendHeader(nil, "test", 3)
	b = append(b, "body"...)
	b = SealSnapshot(b, HeaderSize)
	body, err := OpenSnapshot(b, "test", 3)
	require.NoError(t, err)
	assert.Equal(t, "body", string(body))

	_, err = OpenSnapshot(b, "test", 2)
	assert.ErrorIs(t, err, ErrUnknownVersion)
	damaged := bytes.Clone(b)
	damaged[HeaderSize] ^= 1
	_, err = OpenSnapshot(damaged, "test", 3)
	assert.ErrorIs(t, err, ErrDamaged)
	_, err = OpenSnapshot(b[:HeaderSize+2], "test", 3)
	assert.ErrorIs(t, err, ErrDamaged)
}
