// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package benchmem

import "testing"

func TestRetainedCountsWhatIsKeptNotWhatIsDropped(t *testing.T) {
	kept := Retained(func() any { return make([]byte, 1<<20) })
	if kept < 1<<20 || kept > 1<<20+64<<10 {
		t.Fatalf("a kept MiB measured as %d bytes", kept)
	}
	dropped := Retained(func() any {
		garbage := make([]byte, 1<<20)
		garbage[0] = 1
		return nil
	})
	if dropped > 64<<10 {
		t.Fatalf("a dropped MiB measured as %d bytes", dropped)
	}
}

func TestRetainedWithObjectsCountsTheObjectsKept(t *testing.T) {
	type node struct {
		next *node
		_    [48]byte
	}
	_, objects := RetainedWithObjects(func() any {
		var head *node
		for range 1000 {
			head = &node{next: head}
		}
		return head
	})
	if objects < 900 || objects > 1100 { // the test runner's own objects come and go
		t.Fatalf("a list of 1,000 nodes measured as %d objects", objects)
	}
}
