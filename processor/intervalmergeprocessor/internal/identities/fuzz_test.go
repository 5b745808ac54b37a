// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package identities

import (
	"testing"
	"time"

	"github.com/gpubuild/otelcol-gpubuild/internal/requestid"
)

// FuzzLoad: any snapshot is loaded without a panic, and one that loads
// gives a set whose snapshot loads back to the same set.
func FuzzLoad(f *testing.F) {
	s := New(time.Hour)
	for _, q := range []uint64{1, 2, 5, 9} {
		s.Add(requestid.ID{Instance: "a", Sequence: q}, time.Unix(1_800_000_000, 0))
	}
	f.Add(s.AppendSnapshot(nil))
	f.Add([]byte("gpid\x01\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := New(time.Hour)
		if err := r.Load(b); err != nil {
			return
		}
		again := New(time.Hour)
		if err := again.Load(r.AppendSnapshot(nil)); err != nil {
			t.Fatalf("a loaded set's snapshot does not load: %v", err)
		}
		for k, in := range r.instances {
			for _, sp := range in.spans {
				if !again.Seen(requestid.ID{Instance: k, Sequence: sp.lo}) || !again.Seen(requestid.ID{Instance: k, Sequence: sp.hi}) {
					t.Fatalf("span %v of %q lost", sp, k)
				}
			}
		}
	})
}
