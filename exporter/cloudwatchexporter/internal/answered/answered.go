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
// Only answers a previous process recorded are looked up: a request of
// this process identical to one it sent before is new data (the same
// datums sent twice on purpose), never a dispatch again. Once the queue has
// been empty after the start, nothing dispatched again is left, and Forget
// ends the look-ups.
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

	mu  sync.Mutex
	seq uint64 // sequence number of the next answer
	// previous holds the answers of previous processes, nil once forgotten.
	previous map[uint64]struct{}
}

// Open reads the record a previous process left in client (which the
// Record closes at Close) and returns it with the number of answers it holds.
func Open(ctx context.Context, client storage.Client, size int) (*Record, int, error) {
	r := &Record{client: client, size: size, previous: make(map[uint64]struct{}, size)}
	ops := make([]*storage.Operation, size)
	for i := range ops {
		ops[i] = storage.GetOperation(slotKey(i))
	}
	if err := client.Batch(ctx, ops...); err != nil {
		return nil, 0, err
	}
	var last uint64
	for _, op := range ops {
		if len(op.Value) != 16 {
			continue // never written, or not ours: an empty slot
		}
		seq, hash := binary.LittleEndian.Uint64(op.Value), binary.LittleEndian.Uint64(op.Value[8:])
		if hash == 0 {
			continue
		}
		r.previous[hash] = struct{}{}
		if seq >= last {
			last, r.seq = seq, seq+1
		}
	}
	return r, len(r.previous), nil
}

// Answered reports whether a previous process recorded a request whose
// body hashes to hash as answered (and Forget was not called since).
func (r *Record) Answered(hash uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.previous[nonZero(hash)]
	return ok
}

// Forget ends the look-ups of previous processes' answers.
func (r *Record) Forget() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.previous = nil
}

// Add records that a request whose body hashes to hash was answered: one
// storage write, read by the next process.
func (r *Record) Add(ctx context.Context, hash uint64) error {
	r.mu.Lock()
	seq := r.seq
	r.seq++
	r.mu.Unlock()
	var v [16]byte
	binary.LittleEndian.PutUint64(v[:], seq)
	binary.LittleEndian.PutUint64(v[8:], nonZero(hash))
	return r.client.Set(context.WithoutCancel(ctx), slotKey(int(seq%uint64(r.size))), v[:])
}

// Close closes the storage client.
func (r *Record) Close(ctx context.Context) error { return r.client.Close(ctx) }

// nonZero maps hash 0, which marks an empty slot, to 1.
func nonZero(hash uint64) uint64 { return max(hash, 1) }

func slotKey(i int) string { return slotPrefix + strconv.Itoa(i) }
