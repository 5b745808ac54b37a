// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package receipts

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gpubuild/otelcol-gpubuild/internal/requestid"
)

// FuzzRead: any file content is read without a panic, and what is read
// back is a prefix of the records a journal wrote.
func FuzzRead(f *testing.F) {
	dir := f.TempDir()
	j, _, err := Open(dir, "journal_seed", false)
	if err != nil {
		f.Fatal(err)
	}
	_ = j.Append(requestid.ID{Instance: "a", Sequence: 1}, true, []byte("m1"))
	_ = j.Append(requestid.ID{}, false, []byte("m2"))
	seed, err := os.ReadFile(j.seg.Path)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add(seed[:len(seed)-3])
	f.Add([]byte("gpim\x01\x00\x00\x00\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(t.TempDir(), "seg")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		n, discarded, _ := Read(path, func(requestid.ID, bool, []byte) error { return nil })
		if n < 0 || discarded < 0 || discarded > int64(len(b)) {
			t.Fatalf("records %d, discarded %d of %d bytes", n, discarded, len(b))
		}
	})
}
