// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package gpujoin

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/gpubuild/otelcol-gpubuild/internal/gpucost"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func window(from, to time.Duration) gpucost.Window {
	return gpucost.Window{From: t0.Add(from), To: t0.Add(to)}
}

// A remembered window overlaps later runs on its GPU only; a run's own
// window is not its overlap; windows that ended more than keep before a new
// one starts are forgotten.
func TestRecentOverlapping(t *testing.T) {
	r := NewRecent(time.Minute)
	r.Remember("GPU-a", window(0, 10*time.Second), 1)
	r.Remember("GPU-a", window(0, 10*time.Second), 1) // again: once

	w := window(5*time.Second, 20*time.Second)
	assert.Equal(t, []gpucost.Window{window(0, 10*time.Second)}, r.Overlapping(nil, "GPU-a", w, 2))
	assert.Empty(t, r.Overlapping(nil, "GPU-a", w, 1), "its own window")
	assert.Empty(t, r.Overlapping(nil, "GPU-b", w, 2), "another GPU")
	assert.Empty(t, r.Overlapping(nil, "GPU-a", window(10*time.Second, 20*time.Second), 2), "touching is not overlapping")

	r.Remember("GPU-a", window(2*time.Minute, 3*time.Minute), 3)
	assert.Empty(t, r.Overlapping(nil, "GPU-a", w, 2), "forgotten: ended over a minute before the last one began")
}

func TestHintMatches(t *testing.T) {
	byIndex := Hint{Index: 3, HasIndex: true}
	assert.True(t, byIndex.Matches(&gpucost.Series{Index: 3, UUID: "GPU-x"}))
	assert.False(t, byIndex.Matches(&gpucost.Series{Index: 0}))
	byUUID := Hint{UUID: "GPU-x", Index: 0, HasIndex: true}
	assert.True(t, byUUID.Matches(&gpucost.Series{Index: 5, UUID: "GPU-x"}), "the UUID wins over the index")
	assert.False(t, byUUID.Matches(&gpucost.Series{Index: 0, UUID: "GPU-y"}))
	assert.True(t, Hint{}.None())
}
