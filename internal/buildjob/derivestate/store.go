// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derivestate

import (
	"context"
	"errors"
	"unsafe"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"

	"github.com/gpubuild/otelcol-gpubuild/internal/buildjob/runmemory"
	"github.com/gpubuild/otelcol-gpubuild/internal/state"
	"github.com/gpubuild/otelcol-gpubuild/internal/state/journal"
)

// Store writes the derivation's state to a storage client, one batch per
// request: Begin, the Put and Delete calls for what the request changed,
// then Commit, in one transaction, before the request is acknowledged. It
// is not safe for concurrent use; the derivation calls it under its lock.
type Store struct {
	client   storage.Client
	cfg      Config
	location string // for log messages: extension and file
	logger   *zap.Logger
	// journal is client when state.journal is set; its checkpoint errors
	// are reported once each.
	journal           *journal.Client
	lastCheckpointErr error

	// resources already written, by key.
	resources map[string]bool
	// bytes of persisted job entries (each job's own in its StoredEntry).
	jobBytes   int64
	nextID     uint64 // next series entry id
	nextJobSeq uint64 // next job entry's place in the key order

	// ops is the batch being written (ptrs points at them); inBuf its
	// operations whose keys or values lie in buf.
	ops     []storage.Operation
	ptrs    []*storage.Operation
	inBuf   []bufOp
	deletes []string // series entries to delete with the next batch
	// joined holds the cumulative tracker's operations, written with the
	// next batch (Joiner).
	joined []*storage.Operation
	buf    []byte
}

// Open gets the owner's client of cfg.Storage (which must be set), with
// the journal in front of it when one is configured. Load reads what a
// previous process saved.
func Open(ctx context.Context, host component.Host, kind component.Kind, owner component.ID, cfg Config, logger *zap.Logger) (*Store, error) {
	opened, err := state.Open(ctx, host, cfg.Config, state.Owner{
		Kind: kind, ID: owner, Client: ClientName,
		Field: "state", What: "derivation state", Logger: logger,
	})
	if err != nil {
		return nil, err
	}
	s := newStore(opened.Client, cfg, opened.Location, logger)
	s.journal = opened.Journal
	if s.journal != nil {
		// A batch writes a few jobs, most of them again within the
		// checkpoint interval: the checkpoint reads only their last
		// entries.
		s.journal.IndexAppends()
	}
	return s, nil
}

func newStore(client storage.Client, cfg Config, location string, logger *zap.Logger) *Store {
	return &Store{
		client:     client,
		cfg:        cfg,
		location:   location,
		logger:     logger,
		resources:  map[string]bool{},
		nextID:     1,
		nextJobSeq: 1,
	}
}

// Location says where the state is (extension, file, journal), for log
// lines.
func (s *Store) Location() string { return s.location }

// Journal is the journal in front of the storage, nil without one.
func (s *Store) Journal() *journal.Client { return s.journal }

// Close closes the client (a journal writes itself into the storage).
func (s *Store) Close(ctx context.Context) error { return s.client.Close(ctx) }

// ResourceRef caches a resource's entry: its key and encoded attributes,
// once computed. The derivation keeps one beside each resource.
type ResourceRef struct {
	key     string
	encoded []byte
}

// Resource returns the key of the entry holding attrs (which ref caches),
// writing the entry with the batch being built when it is not written yet.
func (s *Store) Resource(ref *ResourceRef, attrs pcommon.Map) string {
	if ref.key == "" {
		ref.encoded = encodeAttributes(attrs)
		ref.key = resourceKey(ref.encoded)
	}
	if !s.resources[ref.key] {
		s.resources[ref.key] = true
		s.ops = append(s.ops, storage.Operation{Type: storage.Set, Key: ref.key, Value: encodeResource(ref.encoded)})
	}
	return ref.key
}

// Begin starts a batch: the cumulative tracker's operations and the series
// entries queued for deletion come first.
func (s *Store) Begin() {
	s.ops = s.ops[:0]
	for _, op := range s.joined {
		s.ops = append(s.ops, *op)
	}
	for _, key := range s.deletes {
		s.ops = append(s.ops, storage.Operation{Type: storage.Delete, Key: key})
	}
	if s.journal == nil {
		// One fresh buffer per batch: a storage may keep the values.
		s.buf = make([]byte, 0, cap(s.buf))
	} else {
		// The journal copies every key and value into its record before
		// Batch returns: the buffer serves every batch.
		s.buf = s.buf[:0]
	}
	// Job keys and values are appended to the buffer and sliced out of it
	// once it no longer moves: no allocation per entry.
	s.inBuf = s.inBuf[:0]
}

// PutJob writes the runs of job k (at least one), whose entry stored
// describes: it takes its place in the key order when first written.
func (s *Store) PutJob(stored *runmemory.StoredEntry, k runmemory.Key, runs []Run) {
	if stored.Seq == 0 {
		stored.Seq = s.nextJobSeq
		s.nextJobSeq++
	}
	key := len(s.buf)
	s.buf = appendJobKey(s.buf, stored.Seq, k)
	value := len(s.buf)
	s.buf = EncodeJob(s.buf, runs)
	n := len(s.buf) - value
	s.jobBytes += int64(n - stored.Bytes)
	stored.Bytes = n
	s.inBuf = append(s.inBuf, bufOp{op: len(s.ops), key: key, value: value})
	s.ops = append(s.ops, storage.Operation{Type: storage.Set})
}

// DeleteJob deletes the entry of job k, which has no runs left.
func (s *Store) DeleteJob(stored *runmemory.StoredEntry, k runmemory.Key) {
	if stored.Seq == 0 {
		return // never written
	}
	key := len(s.buf)
	s.buf = appendJobKey(s.buf, stored.Seq, k)
	s.inBuf = append(s.inBuf, bufOp{op: len(s.ops), key: key, value: len(s.buf)})
	s.ops = append(s.ops, storage.Operation{Type: storage.Delete})
	s.jobBytes -= int64(stored.Bytes)
	*stored = runmemory.StoredEntry{}
}

// PutSeries writes a series under *key, which names its entry once
// written (empty: a new entry).
func (s *Store) PutSeries(key *string, sr *Series) {
	if *key == "" {
		*key = SeriesKey(s.nextID)
		s.nextID++
	}
	start := len(s.buf)
	s.buf = EncodeSeries(s.buf, sr)
	s.inBuf = append(s.inBuf, bufOp{op: len(s.ops), key: -1, value: start})
	s.ops = append(s.ops, storage.Operation{Type: storage.Set, Key: *key})
}

// PutMeta writes the start time of cumulative series.
func (s *Store) PutMeta(start pcommon.Timestamp) {
	s.ops = append(s.ops, storage.Operation{Type: storage.Set, Key: KeyMeta, Value: encodeMeta(start)})
}

// QueueDelete deletes a series entry with the next batch that succeeds.
func (s *Store) QueueDelete(key string) { s.deletes = append(s.deletes, key) }

// Empty says whether the batch being built writes nothing.
func (s *Store) Empty() bool { return len(s.ops) == 0 }

// Commit writes the batch. On failure the resources it wrote are written
// again when next needed, the queued deletions wait for the next batch and
// the cumulative tracker's operations are dropped (its series are written
// again at their next point).
func (s *Store) Commit(ctx context.Context) error {
	// The buffer no longer moves: slice the keys and values out of it.
	for i, b := range s.inBuf {
		end := len(s.buf)
		if i+1 < len(s.inBuf) {
			end = s.inBuf[i+1].key
			if end < 0 {
				end = s.inBuf[i+1].value
			}
		}
		op := &s.ops[b.op]
		if b.key >= 0 {
			op.Key = unsafe.String(&s.buf[b.key], b.value-b.key)
		}
		if op.Type == storage.Set {
			op.Value = s.buf[b.value:end:end]
		}
	}
	err := s.batch(ctx)
	if err != nil {
		for _, op := range s.ops {
			if op.Type == storage.Set && len(op.Key) > len(KeyResPrefix) && op.Key[:len(KeyResPrefix)] == KeyResPrefix {
				delete(s.resources, op.Key)
			}
		}
		s.joined = s.joined[:0]
		clear(s.ops)
		return err
	}
	clear(s.ops) // do not keep the values alive
	s.joined = s.joined[:0]
	s.deletes = s.deletes[:0]
	return nil
}

// bufOp is an operation of the batch whose key (from offset key, up to
// value; -1: the key is a string of its own) and value (from offset value
// up to the next bufOp's start) lie in the batch's buffer.
type bufOp struct{ op, key, value int }

// batch writes s.ops in one Batch.
func (s *Store) batch(ctx context.Context) error {
	s.ptrs = s.ptrs[:0]
	for i := range s.ops {
		s.ptrs = append(s.ptrs, &s.ops[i])
	}
	err := s.client.Batch(ctx, s.ptrs...)
	clear(s.ptrs)
	return err
}

// Delete deletes series entries now, in a batch of their own (those of a
// flush the next consumer accepted).
func (s *Store) Delete(ctx context.Context, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	s.ops = s.ops[:0]
	for _, key := range keys {
		s.ops = append(s.ops, storage.Operation{Type: storage.Delete, Key: key})
	}
	err := s.batch(ctx)
	clear(s.ops)
	return err
}

// CheckpointFailed says whether the journal's checkpoint failed since the
// last call with another error than the last one, which it logs: the
// batches stay in the journal and the next checkpoint writes them.
func (s *Store) CheckpointFailed() bool {
	if s.journal == nil {
		return false
	}
	err := s.journal.CheckpointError()
	if err == nil || errors.Is(err, s.lastCheckpointErr) {
		s.lastCheckpointErr = err
		return false
	}
	s.lastCheckpointErr = err
	s.logger.Warn("Failed to write the derivation state journal into the storage; the journal keeps the batches and the next checkpoint writes them",
		zap.String("storage", s.location), zap.Error(err))
	return true
}

// OverBudget says whether the persisted run memory is over
// state.max_bytes.
func (s *Store) OverBudget() bool { return s.jobBytes > s.cfg.MaxBytes }

// JobBytes is the size of the persisted run memory.
func (s *Store) JobBytes() int64 { return s.jobBytes }

// RunForgotten accounts for a run the derivation forgot from a job with
// runsLeft runs, whose entry is rewritten with the next batch: until then
// the run's share of the entry is an estimate.
func (s *Store) RunForgotten(stored *runmemory.StoredEntry, runsLeft int) {
	share := stored.Bytes / (runsLeft + 1)
	stored.Bytes -= share
	s.jobBytes -= int64(share)
}

// Joiner is the storage client for the processor's cumulative tracker:
// its batches join the next batch, so that a baseline and the counts it
// produced are written in one transaction.
func (s *Store) Joiner() storage.Client { return batchJoiner{Client: s.client, s: s} }

type batchJoiner struct {
	storage.Client
	s *Store
}

// Batch copies the operations (the tracker reuses them) for the next batch.
func (b batchJoiner) Batch(_ context.Context, ops ...*storage.Operation) error {
	for _, op := range ops {
		c := *op
		b.s.joined = append(b.s.joined, &c)
	}
	return nil
}

// Walk lists the shared client's entries (the tracker reads its own).
func (b batchJoiner) Walk(ctx context.Context, fn storage.WalkFunc) error {
	return b.Client.(storage.Walker).Walk(ctx, fn)
}

// Close does nothing: the store closes the shared client.
func (batchJoiner) Close(context.Context) error { return nil }
