// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package writefailure

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWriteReserveIsRealAndGivenUpWhenSpaceRunsLow(t *testing.T) {
	dir := t.TempDir()
	r := newWriteReserve(dir, 1<<20)
	require.NoError(t, r.create())
	fi, err := os.Stat(r.path)
	require.NoError(t, err)
	assert.Equal(t, int64(1<<20), fi.Size())
	assert.True(t, r.inPlace)

	released, err := r.releaseIfLow()
	require.NoError(t, err)
	assert.False(t, released, "plenty of room: kept")
	assert.FileExists(t, r.path)

	// A reserve larger than what is free: the volume counts as low.
	free, err := r.free()
	require.NoError(t, err)
	r.size = free + 1
	released, err = r.releaseIfLow()
	require.NoError(t, err)
	assert.True(t, released)
	assert.NoFileExists(t, r.path)
	free, err = r.free()
	require.NoError(t, err)
	r.size = free + 1
	assert.False(t, r.roomFor(0))
	assert.Error(t, r.create(), "not created without room for it twice over")
	assert.NoFileExists(t, r.path)
}
