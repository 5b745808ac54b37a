// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package identities

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/requestid"
)

func id(inst string, seq uint64) requestid.ID { return requestid.ID{Instance: inst, Sequence: seq} }

// TestOutOfOrderSequencesCollapse: requests arriving in any order are each
// seen once, and a complete run collapses to one range.
func TestOutOfOrderSequencesCollapse(t *testing.T) {
	s := New(time.Hour)
	now := time.Now()
	order := rand.New(rand.NewPCG(1, 2)).Perm(1000)
	for _, q := range order {
		require.False(t, s.Seen(id("a", uint64(q+1))))
		s.Add(id("a", uint64(q+1)), now)
		require.True(t, s.Seen(id("a", uint64(q+1))))
	}
	assert.Equal(t, []span{{1, 1000}}, s.instances["a"].spans)
	assert.False(t, s.Seen(id("a", 1001)))
	assert.False(t, s.Seen(id("b", 1)), "instances apart")
}

// TestGapsStayUntilFilled: sequences sent to another gateway leave a gap;
// they are not seen here, the sequences around them are.
func TestGapsStayUntilFilled(t *testing.T) {
	s := New(time.Hour)
	now := time.Now()
	for q := uint64(1); q <= 100; q++ {
		if q < 40 || q > 60 {
			s.Add(id("a", q), now)
		}
	}
	assert.Equal(t, []span{{1, 39}, {61, 100}}, s.instances["a"].spans)
	for q := uint64(40); q <= 60; q++ {
		assert.False(t, s.Seen(id("a", q)))
	}
	for q := uint64(40); q <= 60; q++ {
		s.Add(id("a", q), now)
	}
	assert.Equal(t, []span{{1, 100}}, s.instances["a"].spans)
}

func TestRangesPerInstanceAreBounded(t *testing.T) {
	s := New(time.Hour)
	now := time.Now()
	closed := 0
	for q := uint64(1); q <= 2*MaxRanges+10; q += 2 {
		if s.Add(id("a", q), now) {
			closed++
		}
	}
	assert.Len(t, s.instances["a"].spans, MaxRanges)
	assert.Equal(t, 5, closed)
	assert.True(t, s.Seen(id("a", 2)), "the lowest gaps count as seen")
	assert.False(t, s.Seen(id("a", 2*MaxRanges+8)))
}

func TestInstancesExpireAfterTheirTTL(t *testing.T) {
	s := New(time.Hour)
	t0 := time.Now()
	s.Add(id("old", 1), t0)
	s.Add(id("live", 1), t0)
	s.Add(id("live", 2), t0.Add(50*time.Minute))
	assert.Equal(t, 1, s.Expire(t0.Add(61*time.Minute)))
	assert.False(t, s.Seen(id("old", 1)))
	assert.True(t, s.Seen(id("live", 1)))
}

func TestSnapshotRoundTrip(t *testing.T) {
	s := New(time.Hour)
	now := time.Unix(1_800_000_000, 0)
	for _, q := range []uint64{1, 2, 3, 7, 9, 10, 1 << 40} {
		s.Add(id("a", q), now)
	}
	s.Add(id("b", 5), now.Add(time.Minute))
	snap := s.AppendSnapshot(nil)
	r := New(time.Hour)
	require.NoError(t, r.Load(snap))
	assert.Equal(t, s.instances, r.instances)
	assert.Equal(t, snap, r.AppendSnapshot(nil))
}

func TestDamagedSnapshotIsRefused(t *testing.T) {
	s := New(time.Hour)
	s.Add(id("a", 3), time.Now())
	snap := s.AppendSnapshot(nil)
	for i := range snap {
		b := append([]byte(nil), snap...)
		b[i] ^= 0x40
		r := New(time.Hour)
		r.Add(id("keep", 1), time.Now())
		err := r.Load(b)
		require.Error(t, err, "byte %d flipped", i)
		assert.True(t, r.Seen(id("keep", 1)), "a refused snapshot changes nothing")
	}
	for n := range len(snap) {
		assert.Error(t, New(time.Hour).Load(snap[:n]), "cut at %d", n)
	}
	b := append([]byte(nil), snap...)
	b[4] = 2
	assert.ErrorIs(t, New(time.Hour).Load(b), ErrUnknownFormat)
}
