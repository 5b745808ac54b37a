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

	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"

	"github.com/gpubuild/otelcol-gpubuild/internal/buildjob/runmemory"
)

// load reads every entry. An entry that cannot be read is skipped, counted
// in d.stats.stateSkipped and logged: its runs are unknown (a late record
// of one of them may count it again, at most once) and its counts are lost;
// the rest of the state is restored.
func (st *derivationState) load(ctx context.Context, d *deriver, now time.Time, logger *zap.Logger) error {
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
func (st *derivationState) mergeSeries(d *deriver, s *series) {
	cur := d.series.merge(s)
	if cur == nil {
		return
	}
	d.markDirty(cur)
	if s.stateKey != "" {
		st.deletes = append(st.deletes, s.stateKey)
	}
}
