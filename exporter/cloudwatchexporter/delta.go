// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"

	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/translate"
	"github.com/gpubuild/otelcol-gpubuild/internal/cumulative"
)

// deltaConverter rewrites cumulative monotonic sums, cumulative histograms and
// summaries into deltas, in place, before the data enters the sending queue
// (internal/cumulative does the work; this file maps its results onto the
// exporter's telemetry).
//
// Converting before the queue, not at send time, is what makes retries exact:
// a retried or replayed request (from memory or from the persistent queue
// after a restart) carries the same deltas as the first attempt, whereas a
// cumulative point translated again would give a zero delta on retry.
type deltaConverter struct {
	tracker *cumulative.Tracker
	// store is the storage client once attached, else nil.
	store storage.Client
}

func newDeltaConverter(cfg CumulativeStateConfig) *deltaConverter {
	return newLoggedDeltaConverter(cfg, zap.NewNop())
}

func newLoggedDeltaConverter(cfg CumulativeStateConfig, logger *zap.Logger) *deltaConverter {
	return &deltaConverter{tracker: cumulative.New(cfg.trackerConfig(), logger)}
}

// conversion is what one convert call did besides rewriting the data.
type conversion struct {
	dropped    translate.DropCounts
	records    []conversionRecord
	evictions  int64
	readErrors int64
	result     cumulative.Result
}

// reset empties cv, keeping its buffers.
func (cv *conversion) reset() {
	cv.result.Reset()
	*cv = conversion{records: cv.result.Records, result: cv.result}
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

// convert rewrites every cumulative point in md into a delta, removes the
// points that cannot be converted and counts them in cv.dropped.
func (c *deltaConverter) convert(ctx context.Context, md pmetric.Metrics, now time.Time, cv *conversion) {
	r := &cv.result
	if len(cv.records) > 0 {
		r.Records = nil // cv.records may share this buffer: keep it intact
	}
	r.Reset()
	c.tracker.Convert(ctx, md, now, r)
	for reason, n := range r.Dropped {
		cv.dropped[trackerReasons[reason]] += n
	}
	if len(cv.records) == 0 {
		cv.records = r.Records // shared, no copy: reset clears both
	} else {
		cv.records = append(cv.records, r.Records...)
	}
	cv.evictions += r.Evictions
	cv.readErrors += r.ReadErrors
}

func (c *deltaConverter) undo(records []cumulative.Record) { c.tracker.Undo(records) }

func (c *deltaConverter) undoPoints(md pmetric.Metrics) { c.tracker.UndoMetrics(md) }

func (c *deltaConverter) seriesCount() int { return c.tracker.Len() }

// stateLoad is what attachStorage found.
type stateLoad struct {
	restored, expired int
	readErrors        int64
	listed            bool
}

// conversionRecord is a point that moved its series on (see cumulative.Record).
type conversionRecord = cumulative.Record

// attachStorage makes c save its state through client and loads what a
// previous process saved.
func (c *deltaConverter) attachStorage(ctx context.Context, client storage.Client, now time.Time) stateLoad {
	c.store = client
	l := c.tracker.Attach(ctx, client, now)
	return stateLoad{restored: l.Restored, expired: l.Expired, readErrors: l.ReadErrors, listed: l.Listed}
}

func (c *deltaConverter) save(ctx context.Context, records []cumulative.Record) error {
	return c.tracker.Save(ctx, records)
}

func (c *deltaConverter) closeStorage(ctx context.Context) error { return c.tracker.Close(ctx) }
