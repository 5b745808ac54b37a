// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package answered keeps a record of the requests CloudWatch answered, so
// that a request sent again after a kill -9 is recognised and not sent twice.
//
// PutMetricData has no idempotency key. The sending queue records an item
// as done only after its export returns; a process killed between
// CloudWatch's answer and that record sends the item again at the next
// start. Recording each answered request (its body's hash) in one storage
// write right after the answer narrows that window to the write: a
// re-dispatched item packs into the same requests, whose hashes are found
// here and which are then not sent.
//
// The record is a ring of the last Size answers in the storage extension
// (one key per slot, each answer one Set): it needs no pruning and its
// start costs one read of Size keys. An answer falls out of the ring after
// Size later answers, far more than the requests of the items in flight at
// any time (one consumer, a few requests per item), which are the only
// ones that can be sent again.
package answered // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/answered"

import (
	"context"
	"encoding/binary"
	"strconv"
	"sync"

	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// Size is how many answers the record keeps.
const Size = 4096

const slotPrefix = "answered/"

// Record is the ring of answered requests' hashes; its methods are safe
// for concurrent use.
type Record struct {
	client storage.Client
	size   int

	mu    sync.Mutex
	seq   uint64            // sequence number of the next answer
	slots []uint64          // hash in each slot (0: empty)
	index map[uint64]uint32 // hash -> slot
}

// Open reads the record a previous process left in client (which the
// Record closes at Close) and returns it with the number of answers it holds.
func Open(ctx context.Context, client storage.Client, size int) (*Record, int, error) {
	r := &Record{client: client, size: size, slots: make([]uint64, size), index: make(map[uint64]uint32, size)}
	ops := make([]*storage.Operation, size)
	for i := range ops {
		ops[i] = storage.GetOperation(slotKey(i))
	}
	if err := client.Batch(ctx, ops...); err != nil {
		return nil, 0, err
	}
	var last uint64
	for i, op := range ops {
		if len(op.Value) != 16 {
			continue // never written, or not ours: an empty slot
		}
		seq, hash := binary.LittleEndian.Uint64(op.Value), binary.LittleEndian.Uint64(op.Value[8:])
		if hash == 0 {
			continue
		}
		r.slots[i], r.index[hash] = hash, uint32(i)
		if seq >= last {
			last, r.seq = seq, seq+1
		}
	}
	return r, len(r.index), nil
}

// Answered reports whether a request whose body hashes to hash was answered.
func (r *Record) Answered(hash uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.index[nonZero(hash)]
	return ok
}

// Add records that a request whose body hashes to hash was answered: one
// storage write. The hash is in the record in memory even when the write
// fails (this process still knows; only a kill before a later write of the
// same slot forgets it).
func (r *Record) Add(ctx context.Context, hash uint64) error {
	hash = nonZero(hash)
	r.mu.Lock()
	seq := r.seq
	r.seq++
	slot := int(seq % uint64(r.size))
	if old := r.slots[slot]; old != 0 && r.index[old] == uint32(slot) {
		delete(r.index, old)
	}
	r.slots[slot], r.index[hash] = hash, uint32(slot)
	r.mu.Unlock()
	var v [16]byte
	binary.LittleEndian.PutUint64(v[:], seq)
	binary.LittleEndian.PutUint64(v[8:], hash)
	return r.client.Set(context.WithoutCancel(ctx), slotKey(slot), v[:])
}

// Close closes the storage client.
func (r *Record) Close(ctx context.Context) error { return r.client.Close(ctx) }

// nonZero maps hash 0, which marks an empty slot, to 1.
func nonZero(hash uint64) uint64 { return max(hash, 1) }

func slotKey(i int) string { return slotPrefix + strconv.Itoa(i) }
