// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package receipts

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/requestid"
)

type rec struct {
	id    requestid.ID
	hasID bool
	body  string
}

func readAll(t *testing.T, path string) ([]rec, int64) {
	t.Helper()
	var out []rec
	_, discarded, err := Read(path, func(id requestid.ID, hasID bool, m []byte) error {
		out = append(out, rec{id, hasID, string(m)})
		return nil
	})
	require.NoError(t, err)
	return out, discarded
}

// TestSegmentsRotateAndAreFoundAgain: records are read back in order with
// their identities; segments a process left are listed oldest first and the
// next process's segment numbers continue after them.
func TestSegmentsRotateAndAreFoundAgain(t *testing.T) {
	dir := t.TempDir()
	j, left, err := Open(dir, "journal_x", false)
	require.NoError(t, err)
	require.Empty(t, left)
	_, ok, err := j.Rotate()
	require.NoError(t, err)
	assert.False(t, ok, "an empty segment is not rotated")
	require.NoError(t, j.Append(requestid.ID{Instance: "a", Sequence: 7}, true, []byte("one")))
	require.NoError(t, j.Append(requestid.ID{}, false, []byte("two")))
	first, ok, err := j.Rotate()
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, j.Append(requestid.ID{Instance: "b", Sequence: 1}, true, []byte("three")))

	got, discarded := readAll(t, first.Path)
	assert.Zero(t, discarded)
	assert.Equal(t, []rec{{requestid.ID{Instance: "a", Sequence: 7}, true, "one"}, {requestid.ID{}, false, "two"}}, got)
	st, err := os.Stat(first.Path)
	require.NoError(t, err)
	assert.Equal(t, st.Size(), first.Bytes)

	// A killed process: nothing closed. The next one finds both segments.
	j2, left, err := Open(dir, "journal_x", false)
	require.NoError(t, err)
	require.Len(t, left, 2)
	assert.Equal(t, first.Path, left[0].Path)
	assert.Equal(t, uint64(3), j2.seg.Number)
	got, _ = readAll(t, left[1].Path)
	assert.Equal(t, []rec{{requestid.ID{Instance: "b", Sequence: 1}, true, "three"}}, got)
	require.NoError(t, j2.Close())
	_, err = os.Stat(j2.seg.Path)
	assert.ErrorIs(t, err, os.ErrNotExist, "an empty segment is removed at close")
}

// TestTornTailIsDiscarded: a record cut short or damaged (a crash during a
// write, a full disk) ends the segment; the records before it are read.
func TestTornTailIsDiscarded(t *testing.T) {
	dir := t.TempDir()
	j, _, err := Open(dir, "journal_x", false)
	require.NoError(t, err)
	require.NoError(t, j.Append(requestid.ID{Instance: "a", Sequence: 1}, true, []byte("whole")))
	whole := j.Bytes()
	require.NoError(t, j.Append(requestid.ID{Instance: "a", Sequence: 2}, true, []byte("torn record")))
	full := j.Bytes()
	path := j.seg.Path
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	for cut := whole + 1; cut < full; cut++ {
		require.NoError(t, os.WriteFile(path, b[:cut], 0o600))
		got, discarded := readAll(t, path)
		assert.Len(t, got, 1, "cut at %d", cut)
		assert.Equal(t, cut-whole, discarded)
	}
	damaged := append([]byte(nil), b...)
	damaged[full-2] ^= 1
	require.NoError(t, os.WriteFile(path, damaged, 0o600))
	got, discarded := readAll(t, path)
	assert.Len(t, got, 1)
	assert.Equal(t, full-whole, discarded)

	unknown := append([]byte(nil), b...)
	unknown[4] = 9
	require.NoError(t, os.WriteFile(path, unknown, 0o600))
	_, _, err = Read(path, func(requestid.ID, bool, []byte) error { return nil })
	assert.ErrorIs(t, err, ErrUnknownFormat)
}
