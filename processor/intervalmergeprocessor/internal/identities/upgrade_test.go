// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package identities

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/requestid"
)

// testdata/v1.snapshot was written by the release before the shared record
// framing (internal/state/record), of a set that saw sidecar-a's sequences
// 1, 2, 3 and 5 and sidecar-b's 9. It loads as that set, and the set
// writes it back byte for byte.
func TestSnapshotOfThePreviousReleaseLoads(t *testing.T) {
	b, err := os.ReadFile("testdata/v1.snapshot")
	require.NoError(t, err)
	s := New(time.Hour)
	require.NoError(t, s.Load(b))
	assert.Equal(t, 2, s.Len())
	for _, seq := range []uint64{1, 2, 3, 5} {
		assert.True(t, s.Seen(requestid.ID{Instance: "sidecar-a", Sequence: seq}), "sidecar-a %d", seq)
	}
	assert.False(t, s.Seen(requestid.ID{Instance: "sidecar-a", Sequence: 4}))
	assert.True(t, s.Seen(requestid.ID{Instance: "sidecar-b", Sequence: 9}))
	assert.False(t, s.Seen(requestid.ID{Instance: "sidecar-b", Sequence: 8}))
	assert.Equal(t, b, s.AppendSnapshot(nil))
}
