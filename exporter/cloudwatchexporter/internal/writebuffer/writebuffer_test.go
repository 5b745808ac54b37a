// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package writebuffer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBufferKeepsOrderWithinItsBound(t *testing.T) {
	b := New[string](10, time.Second, 8*time.Second)
	require.True(t, b.Push("a", 4))
	require.True(t, b.Push("b", 6))
	assert.False(t, b.Push("c", 1), "past the bound nothing more is held")
	assert.Equal(t, 2, b.Len())
	assert.Equal(t, int64(10), b.Bytes())

	head, ok := b.Head()
	require.True(t, ok)
	assert.Equal(t, "a", head)
	b.Pop()
	assert.Equal(t, int64(6), b.Bytes())
	assert.True(t, b.Push("c", 4), "room again once the head is written")
	for _, want := range []string{"b", "c"} {
		head, ok = b.Head()
		require.True(t, ok)
		assert.Equal(t, want, head)
		b.Pop()
	}
	_, ok = b.Head()
	assert.False(t, ok)
	assert.Zero(t, b.Len())
	assert.Zero(t, b.Bytes())
}

func TestAttemptsBackOffUntilOneSucceeds(t *testing.T) {
	b := New[int](100, time.Second, 4*time.Second)
	now := time.Unix(1000, 0)
	require.True(t, b.Push(1, 1))
	assert.True(t, b.Due(now))
	var waits []time.Duration
	for range 4 {
		b.Failed(now)
		wait := time.Duration(0)
		for !b.Due(now.Add(wait)) {
			wait += 100 * time.Millisecond
		}
		waits = append(waits, wait)
	}
	assert.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second}, waits)

	b.Pop()
	assert.True(t, b.Due(now), "after a write the next attempt is due at once")
	require.True(t, b.Push(2, 1))
	b.Failed(now)
	assert.False(t, b.Due(now.Add(999*time.Millisecond)), "a new episode starts at the shortest wait")
	assert.True(t, b.Due(now.Add(time.Second)))
}
