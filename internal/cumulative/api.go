// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package cumulative turns cumulative OpenTelemetry points (monotonic sums,
// histograms, exponential histograms, summaries) into deltas, per series,
// with a bounded state table that can be saved in a storage extension so
// that a restarted collector neither loses nor repeats an increment.
package cumulative // import "github.com/gpubuild/otelcol-gpubuild/internal/cumulative"

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"
)

// Config bounds the state and sets the rules for first and future points.
type Config struct {
	// TTL forgets a series not seen for this long.
	TTL time.Duration
	// MaxSeries is the most series kept; past it a series seen only once is
	// evicted first (least recently seen first), then the least recently
	// updated established series (see Tracker).
	MaxSeries int
	// MaxAge: the first point of a never-seen series is counted from its
	// start time only if that start is at most MaxAge before now; an older
	// start makes the point a baseline. 0 means no limit.
	MaxAge time.Duration
	// FutureTolerance: a point stamped more than this ahead of now is
	// refused for its series (ReasonFuture) and never becomes its last value.
	// 0 means no check.
	FutureTolerance time.Duration
	// KeepSummaries leaves summaries as they are in Convert, for stores that
	// take cumulative summaries; otherwise each becomes a delta histogram
	// without buckets (what PutMetricData sends as a StatisticSet).
	KeepSummaries bool
}

// Defaults for Config.
const (
	DefaultTTL             = 30 * time.Minute
	DefaultMaxSeries       = 50_000
	DefaultMaxAge          = 24 * time.Hour
	DefaultFutureTolerance = 5 * time.Minute
)

// Reason says why a point produced no delta.
type Reason uint8

const (
	// ReasonBaseline means the point starts (or restarts) the series' history.
	ReasonBaseline Reason = iota
	// ReasonOutOfOrder means older than the series' last point.
	ReasonOutOfOrder
	// ReasonDuplicate means the last point again, itself a baseline.
	ReasonDuplicate
	// ReasonBucketLayoutChanged means histogram bounds changed without a reset.
	ReasonBucketLayoutChanged
	// ReasonFuture means stamped beyond FutureTolerance ahead of now.
	ReasonFuture
	// ReasonStartTooOld means the first point of a series whose start is more
	// than MaxAge ago, taken as a baseline.
	ReasonStartTooOld
	// NumReasons is the number of reasons.
	NumReasons
)

var reasonNames = [NumReasons]string{
	ReasonBaseline:            "cumulative_baseline",
	ReasonOutOfOrder:          "out_of_order",
	ReasonDuplicate:           "duplicate",
	ReasonBucketLayoutChanged: "bucket_layout_changed",
	ReasonFuture:              "from_future",
	ReasonStartTooOld:         "start_too_old",
}

func (r Reason) String() string { return reasonNames[r] }

// Record identifies a point that moved its series on: Undo takes it back,
// Save writes the series' new state.
type Record struct {
	key  uint64
	ts   pcommon.Timestamp
	sent bool
}

// Result is what one Convert or Count call did besides rewriting data.
// Reuse one with Reset to keep its buffers.
type Result struct {
	// Dropped counts points that gave no delta, by reason.
	Dropped [NumReasons]int
	// Records lists the points that moved their series on.
	Records []Record
	// Evictions counts series forgotten to stay within TTL and MaxSeries.
	Evictions int64
	// ReadErrors counts series whose saved state could not be read (their
	// point was taken as a baseline).
	ReadErrors int64
}

// Reset empties r, keeping its buffers.
func (r *Result) Reset() {
	*r = Result{Records: r.Records[:0]}
}

// New returns an empty tracker whose state lives in memory until Attach.
func New(cfg Config, logger *zap.Logger) *Tracker {
	if logger == nil {
		logger = zap.NewNop()
	}
	return &Tracker{cfg: cfg, logger: logger, index: make(map[uint64]int32), probation: newLRUList(), established: newLRUList()}
}

// Persistent reports whether the state is saved (Attach was called).
func (c *Tracker) Persistent() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.store != nil
}
