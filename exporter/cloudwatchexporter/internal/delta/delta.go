// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package delta is the exporter's cumulative to delta conversion before
// the sending queue, over internal/cumulative.
package delta // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/delta"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"

	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/translate"
	"github.com/gpubuild/otelcol-gpubuild/internal/cumulative"
)

// Converter rewrites cumulative monotonic sums, cumulative histograms and
// summaries into deltas, in place, before the data enters the sending queue
// (internal/cumulative does the work; this package maps its results onto
// the exporter's drop reasons).
//
// Converting before the queue, not at send time, is what makes retries exact:
// a retried or replayed request (from memory or from the persistent queue
// after a restart) carries the same deltas as the first attempt, whereas a
// cumulative point translated again would give a zero delta on retry.
type Converter struct {
	// Tracker holds the series.
	Tracker *cumulative.Tracker
	// Store is the storage client once attached, else nil.
	Store storage.Client
}

// NewConverter returns a converter that logs nothing.
func NewConverter(cfg cumulative.Config) *Converter {
	return NewLoggedConverter(cfg, zap.NewNop())
}

// NewLoggedConverter returns a converter.
func NewLoggedConverter(cfg cumulative.Config, logger *zap.Logger) *Converter {
	return &Converter{Tracker: cumulative.New(cfg, logger)}
}

// Conversion is what one convert call did besides rewriting the data.
type Conversion struct {
	Dropped    translate.DropCounts
	Records    []Record
	Evictions  int64
	ReadErrors int64
	result     cumulative.Result
}

// Reset empties cv, keeping its buffers.
func (cv *Conversion) Reset() {
	cv.result.Reset()
	*cv = Conversion{Records: cv.result.Records, result: cv.result}
}

// trackerReasons maps the tracker's reasons onto the points_dropped reasons.
var trackerReasons = [cumulative.NumReasons]translate.DropReason{
	cumulative.ReasonBaseline:            translate.ReasonCumulativeBaseline,
	cumulative.ReasonOutOfOrder:          translate.ReasonOutOfOrder,
	cumulative.ReasonDuplicate:           translate.ReasonDuplicate,
	cumulative.ReasonBucketLayoutChanged: translate.ReasonBucketLayoutChanged,
	cumulative.ReasonFuture:              translate.ReasonTooNew,
	cumulative.ReasonStartTooOld:         translate.ReasonCumulativeBaseline,
}

// Convert rewrites every cumulative point in md into a delta, removes the
// points that cannot be converted and counts them in cv.dropped.
func (c *Converter) Convert(ctx context.Context, md pmetric.Metrics, now time.Time, cv *Conversion) {
	r := &cv.result
	if len(cv.Records) > 0 {
		r.Records = nil // cv.records may share this buffer: keep it intact
	}
	r.Reset()
	c.Tracker.Convert(ctx, md, now, r)
	for reason, n := range r.Dropped {
		cv.Dropped[trackerReasons[reason]] += n
	}
	if len(cv.Records) == 0 {
		cv.Records = r.Records // shared, no copy: reset clears both
	} else {
		cv.Records = append(cv.Records, r.Records...)
	}
	cv.Evictions += r.Evictions
	cv.ReadErrors += r.ReadErrors
}

// Undo takes back the conversion of records (their data was not queued).
func (c *Converter) Undo(records []cumulative.Record) { c.Tracker.Undo(records) }

// UndoPoints takes back the conversion of the points in md.
func (c *Converter) UndoPoints(md pmetric.Metrics) { c.Tracker.UndoMetrics(md) }

// SeriesCount is the number of series remembered.
func (c *Converter) SeriesCount() int { return c.Tracker.Len() }

// StateLoad is what attachStorage found.
type StateLoad struct {
	Restored, Expired int
	ReadErrors        int64
	Listed            bool
}

// Record is a point that moved its series on (see cumulative.Record).
type Record = cumulative.Record

// AttachStorage makes c save its state through client and loads what a
// previous process saved.
func (c *Converter) AttachStorage(ctx context.Context, client storage.Client, now time.Time) StateLoad {
	c.Store = client
	l := c.Tracker.Attach(ctx, client, now)
	return StateLoad{Restored: l.Restored, Expired: l.Expired, ReadErrors: l.ReadErrors, Listed: l.Listed}
}

// Save saves the state records moved.
func (c *Converter) Save(ctx context.Context, records []cumulative.Record) error {
	return c.Tracker.Save(ctx, records)
}

// CloseStorage closes the storage client.
func (c *Converter) CloseStorage(ctx context.Context) error { return c.Tracker.Close(ctx) }
