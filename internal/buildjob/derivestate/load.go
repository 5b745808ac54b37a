// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derivestate

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

// SkipReason says why a persisted entry is skipped at start.
type SkipReason uint8

// Skip reasons: the format byte, anything else that does not decode or
// fit, a resource entry the entry names that is not there.
const (
	SkipUnknownVersion SkipReason = iota
	SkipCorrupted
	SkipMissingResource
	NumSkipReasons
)

var skipReasonNames = [NumSkipReasons]string{
	SkipUnknownVersion:  "unknown_version",
	SkipCorrupted:       "corrupted",
	SkipMissingResource: "missing_resource",
}

func (r SkipReason) String() string { return skipReasonNames[r] }

// Layout is what the derivation's entries must fit to be read back.
type Layout struct {
	// Dims is the number of configured dimensions.
	Dims int
	// Buckets holds, per family, the number of its histogram's buckets
	// (its bounds and one).
	Buckets []int
	// Runs: the derivation remembers job runs (the connector's), kept for
	// JobTimeout plus state.expiry_margin since they entered their list.
	// Without, job entries are left alone.
	Runs       bool
	JobTimeout time.Duration
}

// Snapshot is what a previous process saved, as far as it could be read.
type Snapshot struct {
	// Start is the start of the cumulative series; 0 when none was saved.
	Start pcommon.Timestamp
	// Resources are the attributes of the resources Series and Jobs name,
	// by key.
	Resources map[string]pcommon.Map
	// Series are the counts not yet accepted downstream, in the order they
	// were first written.
	Series []SavedSeries
	// Jobs are the runs still remembered (none expired).
	Jobs []SavedJob
	// Skipped counts the entries, or runs, that could not be read.
	Skipped [NumSkipReasons]int64
}

// SavedSeries is a series and the key of its entry.
type SavedSeries struct {
	Key string
	Series
}

// SavedJob is a job's runs, and where its entry is.
type SavedJob struct {
	Key    runmemory.Key
	Stored runmemory.StoredEntry
	Runs   []Run
	// Rewrite: some runs expired or were unreadable, or the entry is
	// under an earlier version's key; write the job again.
	Rewrite bool
}

type seriesEntry struct {
	id    uint64
	value []byte
}

// Load reads every entry. An entry that cannot be read is skipped (counted
// in Snapshot.Skipped, logged with its key, and deleted): its runs are
// unknown and its counts are lost; the rest of the state is restored.
func (s *Store) Load(ctx context.Context, l Layout, now time.Time) (*Snapshot, error) {
	walker, ok := s.client.(storage.Walker)
	if !ok {
		return nil, fmt.Errorf("state.storage: extension %q cannot list its entries", s.cfg.Storage)
	}
	resources := map[string]pcommon.Map{}
	jobs := map[string][]byte{}
	var seriesEntries []seriesEntry
	var meta []byte
	snap := &Snapshot{Resources: map[string]pcommon.Map{}}
	var deletes []string
	skip := func(key string, err error) {
		r := SkipCorrupted
		if errors.Is(err, ErrUnknownVersion) {
			r = SkipUnknownVersion
		}
		snap.Skipped[r]++
		deletes = append(deletes, key)
		s.logger.Warn("Skipped an unreadable entry of the persisted derivation state",
			zap.String("storage", s.location), zap.String("key", key), zap.String("reason", r.String()), zap.Error(err))
	}
	err := walker.Walk(ctx, func(key string, value []byte) ([]*storage.Operation, error) {
		switch {
		case key == KeyMeta:
			meta = slices.Clone(value)
		case len(key) > len(KeyResPrefix) && key[:len(KeyResPrefix)] == KeyResPrefix:
			m, err := decodeResource(value)
			if err != nil {
				skip(key, err)
				return nil, nil
			}
			resources[key] = m
		case strings.HasPrefix(key, KeyJobPrefix) || strings.HasPrefix(key, KeyJobPrefixByID):
			jobs[key] = slices.Clone(value)
		default:
			if id, ok := parseSeriesKey(key); ok {
				seriesEntries = append(seriesEntries, seriesEntry{id, slices.Clone(value)})
			}
		}
		return nil, nil
	})
	if err != nil {
		return nil, fmt.Errorf("state.storage: reading %s: %w", s.location, err)
	}

	if meta != nil {
		if start, err := decodeMeta(meta); err != nil {
			skip(KeyMeta, err)
		} else {
			snap.Start = start
		}
	}
	resolved := func(key string) bool {
		m, ok := resources[key]
		if ok {
			snap.Resources[key] = m
		}
		return ok
	}

	slices.SortFunc(seriesEntries, func(a, b seriesEntry) int { return cmp.Compare(a.id, b.id) })
	for _, e := range seriesEntries {
		key := SeriesKey(e.id)
		s.nextID = max(s.nextID, e.id+1)
		sr, err := DecodeSeries(e.value, &l)
		if err != nil {
			skip(key, err)
			continue
		}
		if !resolved(sr.Resource) {
			snap.Skipped[SkipMissingResource]++
			deletes = append(deletes, key)
			s.logger.Warn("Skipped a persisted derived series whose resource entry is missing",
				zap.String("storage", s.location), zap.String("key", key))
			continue
		}
		snap.Series = append(snap.Series, SavedSeries{Key: key, Series: *sr})
	}

	restoredRuns, expired := 0, 0
	if l.Runs {
		restored := map[runmemory.Key]bool{}
		keep := l.JobTimeout + s.cfg.ExpiryMargin
		for key, v := range jobs {
			seq, jk, ok := parseJobKey(key)
			if !ok {
				continue
			}
			if restored[jk] {
				// The same job under both key layouts: keep one.
				deletes = append(deletes, key)
				continue
			}
			s.nextJobSeq = max(s.nextJobSeq, seq+1)
			runs, err := decodeJob(v, l.Dims)
			if err != nil {
				skip(key, err)
				continue
			}
			kept := runs[:0] // filtered in place
			for _, r := range runs {
				if now.Sub(r.ListedAt) > keep {
					expired++
					continue
				}
				if !resolved(r.Resource) {
					snap.Skipped[SkipMissingResource]++
					s.logger.Warn("Skipped a persisted run whose resource entry is missing",
						zap.String("storage", s.location), zap.String("key", key))
					continue
				}
				kept = append(kept, r)
			}
			if len(kept) == 0 {
				deletes = append(deletes, key)
				continue
			}
			restored[jk] = true
			job := SavedJob{Key: jk, Runs: kept, Rewrite: seq == 0 || len(kept) != len(runs)}
			if seq == 0 {
				deletes = append(deletes, key) // rewritten under this version's key
			} else {
				job.Stored = runmemory.StoredEntry{Seq: seq, Bytes: len(v)}
				s.jobBytes += int64(len(v))
			}
			snap.Jobs = append(snap.Jobs, job)
			restoredRuns += len(kept)
		}
	}
	for key := range resources {
		if _, used := snap.Resources[key]; used {
			s.resources[key] = true
		} else {
			deletes = append(deletes, key)
		}
	}
	if len(deletes) > 0 {
		ops := make([]*storage.Operation, len(deletes))
		for i, k := range deletes {
			ops[i] = storage.DeleteOperation(k)
		}
		if err := s.client.Batch(ctx, ops...); err != nil {
			s.logger.Warn("Could not delete expired or unreadable derivation state", zap.String("storage", s.location), zap.Error(err))
		}
	}
	s.logger.Info("Restored the derivation state",
		zap.String("storage", s.location), zap.Int("runs", restoredRuns), zap.Int("series", len(snap.Series)),
		zap.Int("expired_runs", expired), zap.Int64("skipped_entries", sum(snap.Skipped[:])))
	return snap, nil
}

func sum(v []int64) int64 {
	var n int64
	for _, x := range v {
		n += x
	}
	return n
}
