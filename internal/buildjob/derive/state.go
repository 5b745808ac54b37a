// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derive

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unsafe"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"

	"github.com/gpubuild/otelcol-gpubuild/internal/buildjob/runmemory"
	"github.com/gpubuild/otelcol-gpubuild/internal/state"
	"github.com/gpubuild/otelcol-gpubuild/internal/state/journal"
)

// StateConfig says where the derivation keeps its state (the run memory and
// the derived counts not yet accepted by the next consumer) so that a
// restarted or killed collector neither loses nor repeats a count.
type StateConfig struct {
	// Storage and Journal: where the state is kept (internal/state).
	state.Config `mapstructure:",squash"`
	// MaxBytes bounds the persisted run memory; beyond it the oldest
	// counted runs are forgotten (counted and logged).
	MaxBytes int64 `mapstructure:"max_bytes"`
	// ExpiryMargin: a run not updated for job_timeout plus this margin is
	// not restored at start (the collector was down longer than that).
	ExpiryMargin time.Duration `mapstructure:"expiry_margin"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// warnInMemory says, once at start, that a component's derivation state is
// not persisted, what a restart then does, and the setting that keeps it.
func warnInMemory(logger *zap.Logger, consequence string) {
	state.WarnInMemory(logger, "derivation state", "state", consequence)
}

// DefaultStateConfig is in memory until a storage is named, with 32 MiB of run
// memory (about 150,000 runs); 10 minutes of margin; no journal until its
// directory is named.
func DefaultStateConfig() StateConfig {
	return StateConfig{Config: state.DefaultConfig(), MaxBytes: 32 << 20, ExpiryMargin: 10 * time.Minute}
}

// Problems checks the state settings, each error naming its field.
func (cfg *StateConfig) Problems() []error {
	var errs []error
	if cfg.MaxBytes <= 0 {
		errs = append(errs, errors.New("state.max_bytes: must be positive"))
	}
	if cfg.ExpiryMargin < 0 {
		errs = append(errs, errors.New("state.expiry_margin: must not be negative"))
	}
	return append(errs, cfg.Config.Problems("state")...)
}

// stateClientName names the connector's client of the storage extension;
// file_storage keeps it in the file connector_<type>_<name>_derivation.
const stateClientName = "derivation"

// Reasons a persisted entry is skipped at start.
type stateSkipReason uint8

const (
	stateSkipUnknownVersion stateSkipReason = iota
	stateSkipCorrupted
	stateSkipMissingResource
	numStateSkipReasons
)

var stateSkipReasonNames = [numStateSkipReasons]string{
	stateSkipUnknownVersion:  "unknown_version",
	stateSkipCorrupted:       "corrupted",
	stateSkipMissingResource: "missing_resource",
}

func (r stateSkipReason) String() string { return stateSkipReasonNames[r] }

// stateStore writes the derivation's state to a storage client, batched
// per request: the entries the request changed, in one transaction, before
// the request is acknowledged. It is used under the emitter's lock.
type stateStore struct {
	client   storage.Client
	cfg      StateConfig
	location string // for log messages: extension and file
	logger   *zap.Logger
	// journal is client when state.journal is set; its checkpoint errors
	// are reported once each.
	journal           *journal.Client
	lastCheckpointErr error

	// resources already written, by key.
	resources map[string]bool
	// bytes of persisted job entries (each job's own in its Stored).
	totalJobs  int64
	nextID     uint64 // next series entry id
	nextJobSeq uint64 // next job entry's place in the key order

	// ops is the batch being written (ptrs points at them); inBuf its
	// operations whose keys or values lie in buf.
	ops     []storage.Operation
	ptrs    []*storage.Operation
	inBuf   []bufOp
	deletes []string // series entries to delete with the next write
	// joined holds the cumulative tracker's operations, written with the
	// next batch (batchJoiner).
	joined []*storage.Operation
	buf    []byte
}

// openState gets the storage client and loads what a previous process
// saved into d.
func openState(ctx context.Context, host component.Host, owner component.ID, kind component.Kind, cfg StateConfig, d *deriver, now time.Time, logger *zap.Logger) (*stateStore, error) {
	opened, err := state.Open(ctx, host, cfg.Config, state.Owner{
		Kind: kind, ID: owner, Client: stateClientName,
		Field: "state", What: "derivation state", Logger: logger,
	})
	if err != nil {
		return nil, err
	}
	client := opened.Client
	st := &stateStore{
		client:     client,
		journal:    opened.Journal,
		cfg:        cfg,
		location:   opened.Location,
		logger:     logger,
		resources:  map[string]bool{},
		nextID:     1,
		nextJobSeq: 1,
	}
	if st.journal != nil {
		// A batch writes a few jobs, most of them again within the
		// checkpoint interval: the checkpoint reads only their last
		// entries.
		st.journal.IndexAppends()
	}
	// Tracking is on while loading: what the load merges or trims is
	// written with the first batch.
	d.state = st
	if d.jobs != nil {
		d.jobs.Track()
	}
	if err := st.load(ctx, d, now, logger); err != nil {
		d.state, d.dirtySeries = nil, nil
		if d.jobs != nil {
			d.jobs.Untrack()
		}
		_ = client.Close(ctx)
		return nil, err
	}
	return st, nil
}

// load reads every entry. An entry that cannot be read is skipped, counted
// in d.stats.stateSkipped and logged: its runs are unknown (a late record
// of one of them may count it again, at most once) and its counts are lost;
// the rest of the state is restored.
func (st *stateStore) load(ctx context.Context, d *deriver, now time.Time, logger *zap.Logger) error {
	walker, ok := st.client.(storage.Walker)
	if !ok {
		return fmt.Errorf("state.storage: extension %q cannot list its entries", st.cfg.Storage)
	}
	resources := map[string]pcommon.Map{}
	jobs := map[string][]byte{}
	var seriesEntries []struct {
		id    uint64
		value []byte
	}
	var meta []byte
	var skipped [numStateSkipReasons]int64
	var deletes []string
	skip := func(key string, err error) {
		r := stateSkipCorrupted
		if errors.Is(err, errUnknownVersion) {
			r = stateSkipUnknownVersion
		}
		skipped[r]++
		deletes = append(deletes, key)
		logger.Warn("Skipped an unreadable entry of the persisted derivation state",
			zap.String("storage", st.location), zap.String("key", key), zap.String("reason", r.String()), zap.Error(err))
	}
	err := walker.Walk(ctx, func(key string, value []byte) ([]*storage.Operation, error) {
		switch {
		case key == stateKeyMeta:
			meta = slices.Clone(value)
		case len(key) > len(stateKeyResPrefix) && key[:len(stateKeyResPrefix)] == stateKeyResPrefix:
			m, err := decodeResource(value)
			if err != nil {
				skip(key, err)
				return nil, nil
			}
			resources[key] = m
		case strings.HasPrefix(key, stateKeyJobPrefix) || strings.HasPrefix(key, stateKeyJobPrefixUnordered):
			jobs[key] = slices.Clone(value)
		default:
			if id, ok := parseSeriesStateKey(key); ok {
				seriesEntries = append(seriesEntries, struct {
					id    uint64
					value []byte
				}{id, slices.Clone(value)})
			}
		}
		return nil, nil
	})
	if err != nil {
		return fmt.Errorf("state.storage: reading %s: %w", st.location, err)
	}

	if meta != nil {
		if start, err := decodeMeta(meta); err != nil {
			skip(stateKeyMeta, err)
		} else if d.cumulative {
			d.restoredStart = start
		}
	}
	used := map[string]bool{}
	resolve := func(key string) *resourceEntry {
		m, ok := resources[key]
		if !ok {
			return nil
		}
		used[key] = true
		res := pcommon.NewResource()
		m.CopyTo(res.Attributes())
		return d.resources.intern(res)
	}

	// Series: counts derived and not accepted downstream, put back as a
	// refused flush would be.
	slices.SortFunc(seriesEntries, func(a, b struct {
		id    uint64
		value []byte
	}) int {
		return cmp.Compare(a.id, b.id)
	})
	restoredSeries := 0
	for _, e := range seriesEntries {
		key := seriesStateKey(e.id)
		st.nextID = max(st.nextID, e.id+1)
		ds, err := decodeSeries(e.value, len(d.dimensions), d.series.bounds)
		if err != nil {
			skip(key, err)
			continue
		}
		res := resolve(ds.resKey)
		if res == nil {
			skipped[stateSkipMissingResource]++
			deletes = append(deletes, key)
			logger.Warn("Skipped a persisted derived series whose resource entry is missing",
				zap.String("storage", st.location), zap.String("key", key))
			continue
		}
		s := &ds.series
		s.labels.res = res
		s.stateKey = key
		st.mergeSeries(d, s)
		restoredSeries++
	}

	// Runs, oldest first so that the open and ended lists keep their order.
	restoredRuns, expired := 0, 0
	if d.jobs != nil {
		restored := map[runmemory.Key][]*runmemory.Run[runPayload]{}
		stored := map[runmemory.Key]runmemory.StoredEntry{}
		rewrite := map[runmemory.Key]bool{} // trimmed, or under an earlier version's key
		keep := d.jobs.Timeout() + st.cfg.ExpiryMargin
		for key, v := range jobs {
			seq, jk, ok := parseJobStateKey(key)
			if !ok {
				continue
			}
			if _, dup := restored[jk]; dup {
				// The same job under both key layouts: keep one.
				deletes = append(deletes, key)
				continue
			}
			st.nextJobSeq = max(st.nextJobSeq, seq+1)
			runs, err := decodeJob(v, len(d.dimensions))
			if err != nil {
				skip(key, err)
				continue
			}
			var kept []*runmemory.Run[runPayload]
			for i := range runs {
				dr := &runs[i]
				listed := time.Unix(0, dr.listedAtNanos)
				if now.Sub(listed) > keep {
					expired++
					continue
				}
				res := resolve(dr.resKey)
				if res == nil {
					skipped[stateSkipMissingResource]++
					logger.Warn("Skipped a persisted run whose resource entry is missing",
						zap.String("storage", st.location), zap.String("key", key))
					continue
				}
				r := dr.Run
				r.Payload.res, r.ListedAt = res, listed
				kept = append(kept, &r)
			}
			if len(kept) == 0 {
				deletes = append(deletes, key)
				continue
			}
			restored[jk] = kept
			if seq == 0 {
				deletes = append(deletes, key) // rewritten under this version's key
			} else {
				stored[jk] = runmemory.StoredEntry{Seq: seq, Bytes: len(v)}
				st.totalJobs += int64(len(v))
			}
			rewrite[jk] = seq == 0 || len(kept) != len(runs)
			restoredRuns += len(kept)
		}
		for jk, jr := range d.jobs.Restore(restored) {
			jr.Stored = stored[jk]
			if rewrite[jk] {
				d.jobs.Touch(jr)
			}
		}
	}
	for key := range resources {
		if used[key] {
			st.resources[key] = true
		} else {
			deletes = append(deletes, key)
		}
	}
	for i, n := range skipped {
		d.stats.stateSkipped[i] += n
	}
	if len(deletes) > 0 {
		ops := make([]*storage.Operation, len(deletes))
		for i, k := range deletes {
			ops[i] = storage.DeleteOperation(k)
		}
		if err := st.client.Batch(ctx, ops...); err != nil {
			logger.Warn("Could not delete expired or unreadable derivation state", zap.String("storage", st.location), zap.Error(err))
		}
	}
	logger.Info("Restored the derivation state",
		zap.String("storage", st.location), zap.Int("runs", restoredRuns), zap.Int("series", restoredSeries),
		zap.Int("expired_runs", expired), zap.Int64("skipped_entries", sum(skipped[:])))
	return nil
}

func sum(v []int64) int64 {
	var n int64
	for _, x := range v {
		n += x
	}
	return n
}

// mergeSeries puts s, persisted under s.stateKey, into d's table: as
// itself, or added to the series with the same labels, whose entry is then
// rewritten and s's deleted.
func (st *stateStore) mergeSeries(d *deriver, s *series) {
	cur := d.series.merge(s)
	if cur == nil {
		return
	}
	d.markDirty(cur)
	if s.stateKey != "" {
		st.deletes = append(st.deletes, s.stateKey)
	}
}

// resourceKey returns the key of res's entry, writing it with the next
// batch when it is new.
func (st *stateStore) resourceKey(res *resourceEntry) string {
	if res.stateKey == "" {
		res.stateEncoded = encodeAttributes(res.attrs)
		res.stateKey = resourceStateKey(res.stateEncoded)
	}
	if !st.resources[res.stateKey] {
		st.resources[res.stateKey] = true
		st.ops = append(st.ops, storage.Operation{Type: storage.Set, Key: res.stateKey, Value: encodeResource(res.stateEncoded)})
	}
	return res.stateKey
}

// persist writes what changed since the last call: the dirty jobs and
// series, and the deletions of forgotten ones, in one batch. On failure the
// entries stay dirty and are written with the next batch; the counts stay
// in memory meanwhile. When the run memory is then over its byte budget,
// the oldest counted runs are forgotten and a second batch writes that.
func (st *stateStore) persist(ctx context.Context, d *deriver) error {
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

func (st *stateStore) write(ctx context.Context, d *deriver) error {
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
func (st *stateStore) batch(ctx context.Context) error {
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
func (st *stateStore) reportCheckpoint(d *deriver) {
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
func (st *stateStore) evictOverBudget(d *deriver) {
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
func (st *stateStore) accepted(ctx context.Context, taken []*series) error {
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
	st *stateStore
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

func (st *stateStore) close(ctx context.Context) error {
	return st.client.Close(ctx)
}
