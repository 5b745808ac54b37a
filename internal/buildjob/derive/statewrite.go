// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derive

import (
	"context"
	"errors"
	"unsafe"

	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.uber.org/zap"

	"github.com/gpubuild/otelcol-gpubuild/internal/buildjob/runmemory"
)

// persist writes what changed since the last call: the dirty jobs and
// series, and the deletions of forgotten ones, in one batch. On failure the
// entries stay dirty and are written with the next batch; the counts stay
// in memory meanwhile. When the run memory is then over its byte budget,
// the oldest counted runs are forgotten and a second batch writes that.
func (st *derivationState) persist(ctx context.Context, d *deriver) error {
	if d.httpTracker != nil {
		// Joins this batch through batchJoiner; it cannot fail.
		_ = d.httpTracker.Save(ctx, d.httpResult.Records)
		d.httpResult.Records = d.httpResult.Records[:0]
	}
	if err := st.write(ctx, d); err != nil {
		return err
	}
	if d.jobs != nil && st.totalJobs > st.cfg.MaxBytes {
		st.evictOverBudget(d)
		return st.write(ctx, d)
	}
	return nil
}

func (st *derivationState) write(ctx context.Context, d *deriver) error {
	st.ops = st.ops[:0]
	for _, op := range st.joined {
		st.ops = append(st.ops, *op)
	}
	if st.journal == nil {
		// One fresh buffer per batch: a storage may keep the values.
		st.buf = make([]byte, 0, cap(st.buf))
	} else {
		// The journal copies every key and value into its record before
		// Batch returns: the buffer serves every batch.
		st.buf = st.buf[:0]
	}
	// Job keys and values are appended to the buffer and sliced out of it
	// once it no longer moves: no allocation per entry.
	st.inBuf = st.inBuf[:0]
	if d.jobs != nil {
		for _, jr := range d.jobs.Dirty() {
			if len(jr.Runs()) == 0 {
				if jr.Stored.Seq != 0 {
					key := len(st.buf)
					st.buf = appendJobStateKey(st.buf, jr.Stored.Seq, jr.Key())
					st.inBuf = append(st.inBuf, bufOp{op: len(st.ops), key: key, value: len(st.buf)})
					st.ops = append(st.ops, storage.Operation{Type: storage.Delete})
					st.totalJobs -= int64(jr.Stored.Bytes)
					jr.Stored = runmemory.StoredEntry{}
				}
				continue
			}
			if jr.Stored.Seq == 0 {
				jr.Stored.Seq = st.nextJobSeq
				st.nextJobSeq++
			}
			key := len(st.buf)
			st.buf = appendJobStateKey(st.buf, jr.Stored.Seq, jr.Key())
			value := len(st.buf)
			st.buf = encodeJob(st.buf, jr.Runs(), st.resourceKey)
			n := len(st.buf) - value
			st.totalJobs += int64(n - jr.Stored.Bytes)
			jr.Stored.Bytes = n
			st.inBuf = append(st.inBuf, bufOp{op: len(st.ops), key: key, value: value})
			st.ops = append(st.ops, storage.Operation{Type: storage.Set})
		}
	}
	for _, key := range st.deletes {
		st.ops = append(st.ops, storage.Operation{Type: storage.Delete, Key: key})
	}
	for _, s := range d.dirtySeries {
		if s.handedOver {
			continue
		}
		if s.stateKey == "" {
			s.stateKey = seriesStateKey(st.nextID)
			st.nextID++
		}
		start := len(st.buf)
		st.buf = encodeSeries(st.buf, s, st.resourceKey(s.labels.res))
		st.inBuf = append(st.inBuf, bufOp{op: len(st.ops), key: -1, value: start})
		st.ops = append(st.ops, storage.Operation{Type: storage.Set, Key: s.stateKey})
	}
	if d.metaDirty {
		st.ops = append(st.ops, storage.Operation{Type: storage.Set, Key: stateKeyMeta, Value: encodeMeta(d.startTime)})
	}
	if len(st.ops) == 0 {
		return nil
	}
	// The buffer no longer moves: slice the keys and values out of it.
	for i, b := range st.inBuf {
		end := len(st.buf)
		if i+1 < len(st.inBuf) {
			end = st.inBuf[i+1].key
			if end < 0 {
				end = st.inBuf[i+1].value
			}
		}
		op := &st.ops[b.op]
		if b.key >= 0 {
			op.Key = unsafe.String(&st.buf[b.key], b.value-b.key)
		}
		if op.Type == storage.Set {
			op.Value = st.buf[b.value:end:end]
		}
	}
	err := st.batch(ctx)
	if err != nil {
		// Resources are written again when next needed.
		for _, op := range st.ops {
			if op.Type == storage.Set && len(op.Key) > len(stateKeyResPrefix) && op.Key[:len(stateKeyResPrefix)] == stateKeyResPrefix {
				delete(st.resources, op.Key)
			}
		}
		d.stats.stateWriteFailures++
		// The tracker's operations are not retried: the series are written
		// again at their next point (see README.md).
		st.joined = st.joined[:0]
		clear(st.ops)
		return err
	}
	clear(st.ops) // do not keep the values alive
	st.joined = st.joined[:0]
	st.deletes = st.deletes[:0]
	d.clearDirty()
	st.reportCheckpoint(d)
	return nil
}

// bufOp is an operation of the batch whose key (from offset key, up to
// value; -1: the key is a string of its own) and value (from offset value
// up to the next bufOp's start) lie in the batch's buffer.
type bufOp struct{ op, key, value int }

// batch writes st.ops in one Batch.
func (st *derivationState) batch(ctx context.Context) error {
	st.ptrs = st.ptrs[:0]
	for i := range st.ops {
		st.ptrs = append(st.ptrs, &st.ops[i])
	}
	err := st.client.Batch(ctx, st.ptrs...)
	clear(st.ptrs)
	return err
}

// reportCheckpoint counts and logs a failed journal checkpoint once: the
// batches stay in the journal and the next checkpoint writes them.
func (st *derivationState) reportCheckpoint(d *deriver) {
	if st.journal == nil {
		return
	}
	err := st.journal.CheckpointError()
	if err == nil || errors.Is(err, st.lastCheckpointErr) {
		st.lastCheckpointErr = err
		return
	}
	st.lastCheckpointErr = err
	d.stats.stateWriteFailures++
	st.logger.Warn("Failed to write the derivation state journal into the storage; the journal keeps the batches and the next checkpoint writes them",
		zap.String("storage", st.location), zap.Error(err))
}

// evictOverBudget forgets the oldest counted runs while the persisted run
// memory is over its byte budget. A forgotten run's late record may count
// it again, so each eviction is counted and logged.
func (st *derivationState) evictOverBudget(d *deriver) {
	for st.totalJobs > st.cfg.MaxBytes {
		jr, ok := d.jobs.EvictOldestEnded()
		if !ok {
			return
		}
		d.stats.stateEvicted++
		// Until the job is rewritten, estimate what the run took.
		share := jr.Stored.Bytes / (len(jr.Runs()) + 1)
		jr.Stored.Bytes -= share
		st.totalJobs -= int64(share)
	}
}

// accepted deletes the entries of series the next consumer accepted (or
// that were dropped for good).
func (st *derivationState) accepted(ctx context.Context, taken []*series) error {
	st.ops = st.ops[:0]
	for _, s := range taken {
		s.handedOver = true
		if s.stateKey != "" {
			st.ops = append(st.ops, storage.Operation{Type: storage.Delete, Key: s.stateKey})
		}
	}
	if len(st.ops) == 0 {
		return nil
	}
	err := st.batch(ctx)
	clear(st.ops)
	return err
}

// batchJoiner is the storage client handed to the processor's cumulative
// tracker: its batches join the state store's next write, so that a
// baseline and the counts it produced are written in one transaction.
type batchJoiner struct {
	storage.Client
	st *derivationState
}

// Batch copies the operations (the tracker reuses them) for the next write.
func (b batchJoiner) Batch(_ context.Context, ops ...*storage.Operation) error {
	for _, op := range ops {
		c := *op
		b.st.joined = append(b.st.joined, &c)
	}
	return nil
}

// Walk lists the shared client's entries (the tracker reads its own).
func (b batchJoiner) Walk(ctx context.Context, fn storage.WalkFunc) error {
	return b.Client.(storage.Walker).Walk(ctx, fn)
}

// Close does nothing: the state store closes the shared client.
func (batchJoiner) Close(context.Context) error { return nil }
