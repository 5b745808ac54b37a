// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"maps"
	"os"
	"path/filepath"
	"testing"
)

// A journal is read back from disk, where anything can have happened to
// it. Records whose checksums hold but whose bodies are anything: opening
// never crashes, and the storage ends as the whole records up to the first
// bad one, applied in order, would leave it (each a set of operations:
// type 1 set key value, type 2 delete key; keys and values after their
// uvarint length).
// castagnoli: the test writes the records by hand, as the format says.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func FuzzReplay(f *testing.F) {
	f.Add([]byte{opSet, 1, 'k', 2, 'v', 'v', opDelete, 1, 'd'}, []byte{opDelete, 1, 'a'}, []byte{})
	f.Add([]byte{opSet, 1, 'a', 0}, []byte{opSet, 1, 'a', 1, '3'}, []byte{7, 0, 0, 0, 1})
	f.Add([]byte{}, []byte{opSet, 0xff, 0xff, 0xff, 0xff, 0x0f}, []byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{3}, []byte{opSet}, []byte("gpbj"))

	f.Fuzz(func(t *testing.T, first, second, tail []byte) {
		records := [][]byte{
			{opSet, 1, 'a', 1, '1'},
			first,
			{opSet, 1, 'b', 1, '2', opDelete, 1, 'a'},
			second,
			{opSet, 1, 'c', 1, '3'},
		}
		file := []byte("gpbj\x01\x00\x00\x00")
		for _, body := range records {
			file = binary.LittleEndian.AppendUint32(file, uint32(len(body)))
			file = binary.LittleEndian.AppendUint32(file, crc32.Checksum(body, castagnoli))
			file = append(file, body...)
		}
		file = append(file, tail...)
		path := filepath.Join(t.TempDir(), "state.journal")
		if err := os.WriteFile(path, file, 0o600); err != nil {
			t.Fatal(err)
		}

		want := map[string][]byte{"before": []byte("x")}
		applied := 0
		for _, body := range records {
			next, ok := applyModel(maps.Clone(want), body)
			if !ok {
				break
			}
			want = next
			applied++
		}

		base := newBase()
		if err := base.Set(context.Background(), "before", []byte("x")); err != nil {
			t.Fatal(err)
		}
		c, r, err := Open(context.Background(), base, path, Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(context.Background())
		same := func(a, b []byte) bool { return string(a) == string(b) }
		switch {
		case applied == len(records) && r.Records > applied:
			// The tail held whole records of its own: not modelled.
		case r.Records != applied:
			t.Fatalf("replayed %d records, want %d (reading stops at the first bad one)", r.Records, applied)
		case !maps.EqualFunc(base.Data(), want, same):
			t.Fatalf("storage %q, want %q", base.Data(), want)
		}
	})
}

// applyModel applies one record body to m, or says it is not a record.
func applyModel(m map[string][]byte, body []byte) (map[string][]byte, bool) {
	field := func(b []byte) ([]byte, []byte, bool) {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return nil, nil, false
		}
		return b[k : k+int(n)], b[k+int(n):], true
	}
	for len(body) > 0 {
		typ := body[0]
		key, rest, ok := field(body[1:])
		if !ok {
			return nil, false
		}
		switch typ {
		case opSet:
			var value []byte
			if value, rest, ok = field(rest); !ok {
				return nil, false
			}
			m[string(key)] = value
		case opDelete:
			delete(m, string(key))
		default:
			return nil, false
		}
		body = rest
	}
	return m, true
}
