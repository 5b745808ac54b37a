// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"cmp"
	"hash/maphash"
	"math"
	"slices"
	"unsafe"
)

// keyIndex maps keys to a position: where a key's last operation starts in
// the journal (noted as it is appended, or found reading the journal
// back). It holds no pointers, so a collection does not scan it: the keys
// are copied back to back into one buffer, each entry says where its key
// is, and an open-addressing table of the keys' hashes finds the entries
// (a key is compared whole where the hashes agree). An indexed key costs
// its bytes and about 40 more, against some 135 with a map of strings
// (BenchmarkIndexMemory: 76 bytes against 174 for a 37-byte key), and
// indexing it allocates nothing once the buffers have grown.
type keyIndex struct {
	keys    []byte
	entries []indexEntry
	// slots holds hash<<32 | entry + 1 (0: free), placed by linear probing
	// from the hash; at most 3/4 full, its length a power of two.
	slots []uint64
	seed  maphash.Seed
}

// indexEntry is one key and its position.
type indexEntry struct {
	pos              int64
	keyStart, keyLen uint32
}

// maxIndexKeyBytes bounds the keys an index holds (its entries address
// them with 32 bits).
const maxIndexKeyBytes = math.MaxUint32

func newKeyIndex() keyIndex { return keyIndex{seed: maphash.MakeSeed()} }

// set makes pos the position of key, copying the key when it is new. The
// caller keeps the keys' bytes within maxIndexKeyBytes (room).
func (x *keyIndex) set(key string, pos int64) {
	h, slot, i := x.find(key)
	if i >= 0 {
		x.entries[i].pos = pos
		return
	}
	e := indexEntry{pos: pos, keyStart: uint32(len(x.keys)), keyLen: uint32(len(key))}
	x.keys = append(x.keys, key...)
	x.entries = append(x.entries, e)
	if len(x.entries)*4 > len(x.slots)*3 {
		x.grow()
		x.place(h, len(x.entries)-1)
		return
	}
	x.slots[slot] = uint64(h)<<32 | uint64(len(x.entries))
}

// get returns the position of key.
func (x *keyIndex) get(key string) (int64, bool) {
	if _, _, i := x.find(key); i >= 0 {
		return x.entries[i].pos, true
	}
	return 0, false
}

// room says whether keys of n more bytes fit.
func (x *keyIndex) room(n int) bool { return int64(len(x.keys))+int64(n) <= maxIndexKeyBytes }

func (x *keyIndex) len() int { return len(x.entries) }

// key is entry e's key, valid until reset (it is not a copy).
func (x *keyIndex) key(e indexEntry) string {
	if e.keyLen == 0 {
		return ""
	}
	return unsafe.String(&x.keys[e.keyStart], int(e.keyLen))
}

// find returns key's hash, and its entry with the slot it is in, or -1
// with the free slot where it would go.
func (x *keyIndex) find(key string) (h uint32, slot, entry int) {
	h = x.hash(key)
	if len(x.slots) == 0 {
		x.slots = make([]uint64, 16)
	}
	mask := len(x.slots) - 1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		s := x.slots[i]
		if s == 0 {
			return h, i, -1
		}
		if uint32(s>>32) == h {
			if e := int(uint32(s)) - 1; x.key(x.entries[e]) == key {
				return h, i, e
			}
		}
	}
}

func (x *keyIndex) hash(key string) uint32 { return uint32(maphash.String(x.seed, key)) }

// place puts entry e, whose key hashes to h, in the first free slot of its
// probe.
func (x *keyIndex) place(h uint32, e int) {
	mask := len(x.slots) - 1
	i := int(h) & mask
	for x.slots[i] != 0 {
		i = (i + 1) & mask
	}
	x.slots[i] = uint64(h)<<32 | uint64(e+1)
}

// grow doubles the table; the slots carry their hashes, so no key is
// hashed again.
func (x *keyIndex) grow() {
	old := x.slots
	x.slots = make([]uint64, 2*len(old))
	for _, s := range old {
		if s != 0 {
			x.place(uint32(s>>32), int(uint32(s))-1)
		}
	}
}

// sortByPos orders the entries by position, for reading the journal
// forward; the table no longer finds them until reindex (or reset).
func (x *keyIndex) sortByPos() {
	slices.SortFunc(x.entries, func(a, b indexEntry) int { return cmp.Compare(a.pos, b.pos) })
}

// reindex makes the table find the entries again after sortByPos.
func (x *keyIndex) reindex() {
	clear(x.slots)
	for i, e := range x.entries {
		x.place(x.hash(x.key(e)), i)
	}
}

// reset empties the index, keeping its buffers for the next keys: the
// keys handed out by key are no longer valid.
func (x *keyIndex) reset() {
	x.keys, x.entries = x.keys[:0], x.entries[:0]
	clear(x.slots)
}
