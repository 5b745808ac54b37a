// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package queuecompress

import (
	"bytes"
	"testing"
)

// Whatever a queue value holds, Decode answers without a crash; a value
// Encode was given (serialized OTLP, which never starts with the prefix's
// zero byte) reads back as it was given.
func FuzzDecode(f *testing.F) {
	f.Add(bytes.Repeat([]byte("requests{s=b} "), 40))
	f.Add([]byte(prefix + "\xff\xff\xff\xff\x0f"))
	f.Add([]byte(prefix))
	f.Add(Encode(nil, bytes.Repeat([]byte{1, 2, 3, 4}, 100)))
	f.Fuzz(func(t *testing.T, value []byte) {
		d, err := Decode(value)
		if Compressed(value) {
			return // damaged or not, answered
		}
		if err != nil || !bytes.Equal(d, value) {
			t.Fatalf("an uncompressed value read as %q, %v", d, err)
		}
		d, err = Decode(Encode(nil, value))
		if err != nil || !bytes.Equal(d, value) {
			t.Fatalf("read back %q, %v; want %q", d, err, value)
		}
	})
}
