// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Keys whose 32-bit hashes are equal are told apart by their bytes: among
// 400,000 keys some twenty pairs share a hash (the chance of none is below
// one in a hundred million), and each key of a pair keeps its own
// position.
func TestKeysWithTheSameHashAreDifferentKeys(t *testing.T) {
	x := newKeyIndex()
	byHash := map[uint32]string{}
	var pairs [][2]string
	for i := range 400_000 {
		k := fmt.Sprintf("jobs/%d", i)
		h := x.hash(k)
		if other, ok := byHash[h]; ok {
			pairs = append(pairs, [2]string{other, k})
			continue
		}
		byHash[h] = k
	}
	require.NotEmpty(t, pairs)
	for i, p := range pairs {
		x.set(p[0], int64(2*i))
		x.set(p[1], int64(2*i+1))
	}
	for i, p := range pairs {
		for j, k := range p {
			pos, ok := x.get(k)
			require.True(t, ok, k)
			assert.Equal(t, int64(2*i+j), pos, k)
		}
	}
	_, ok := x.get("jobs/-1")
	assert.False(t, ok)
}

// The index answers as a map would through sets of new and known keys
// (some empty, some long), growth, sorting by position and indexing again
// (a refused checkpoint), and resets that reuse its buffers.
func TestKeyIndexAnswersAsAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	x := newKeyIndex()
	for round := range 6 {
		want := map[string]int64{}
		for n := range 3000 {
			k := fmt.Sprintf("k%d", rng.IntN(2000))
			switch rng.IntN(50) {
			case 0:
				k = ""
			case 1:
				k = fmt.Sprintf("%0300d", rng.IntN(20))
			}
			pos := int64(rng.IntN(1 << 40))
			if n%1000 == 999 {
				x.sortByPos()
				for i := 1; i < x.len(); i++ {
					require.LessOrEqual(t, x.entries[i-1].pos, x.entries[i].pos)
				}
				x.reindex()
			}
			x.set(k, pos)
			want[k] = pos
		}
		require.Equal(t, len(want), x.len(), "round %d", round)
		for k, pos := range want {
			got, ok := x.get(k)
			require.True(t, ok, "round %d: %q", round, k)
			require.Equal(t, pos, got, "round %d: %q", round, k)
		}
		keys := map[string]bool{}
		for _, e := range x.entries {
			keys[x.key(e)] = true
		}
		require.Len(t, keys, len(want))
		x.reset()
		require.Zero(t, x.len())
		_, ok := x.get("k1")
		require.False(t, ok)
	}
}
