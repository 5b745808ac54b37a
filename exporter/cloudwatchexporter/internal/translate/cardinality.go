// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package translate // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/translate"

import (
	"hash/maphash"
	"time"

	"go.uber.org/zap"

	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/seriesbudget"
)

const (
	// OverflowDimension is the one dimension of a metric's overflow series
	// (the OpenTelemetry SDKs' cardinality limit uses the same attribute).
	OverflowDimension = "otel.metric.overflow"
	// seriesIdleTTL frees the budget place of a series not seen for this long.
	seriesIdleTTL = time.Hour
	// overflowWarnEvery rate-limits the warning, per metric.
	overflowWarnEvery = time.Minute
)

// SeriesLimiter applies max_series_per_metric to translated datums.
type SeriesLimiter struct {
	budget   *seriesbudget.Budget
	max      int
	seed     maphash.Seed
	overflow []Dimension // the overflow series' dimensions; never modified
	logger   *zap.Logger
}

// NewSeriesLimiter returns the limiter of maxSeries series per metric;
// nil when maxSeries is 0 (no limit).
func NewSeriesLimiter(maxSeries int, logger *zap.Logger) *SeriesLimiter {
	if maxSeries <= 0 {
		return nil
	}
	return &SeriesLimiter{
		budget:   seriesbudget.New(maxSeries, seriesIdleTTL, overflowWarnEvery),
		max:      maxSeries,
		seed:     maphash.MakeSeed(),
		overflow: []Dimension{{OverflowDimension, "true"}},
		logger:   logger,
	}
}

// Apply folds the datums of series past their metric's budget into the
// metric's overflow series (same name, the one dimension
// otel.metric.overflow=true; CloudWatch aggregates them, so sums and counts
// are kept) and counts each folded point.
func (l *SeriesLimiter) Apply(tr *Translation, now time.Time) {
	var h maphash.Hash
	h.SetSeed(l.seed)
	for i := range tr.Datums {
		d := &tr.Datums[i]
		if i > 0 && d.Point == tr.Datums[i-1].Point {
			d.Dims = tr.Datums[i-1].Dims // the same point: the same decision
			continue
		}
		h.Reset()
		h.WriteString(d.Name)
		for _, dim := range d.Dims {
			h.WriteByte(0)
			h.WriteString(dim.Name)
			h.WriteByte(0)
			h.WriteString(dim.Value)
		}
		admitted, over := l.budget.Admit(d.Name, h.Sum64(), now, func() []seriesbudget.Dimension {
			out := make([]seriesbudget.Dimension, len(d.Dims))
			for j, dim := range d.Dims {
				out[j] = seriesbudget.Dimension{Name: dim.Name, ValueHash: maphash.String(l.seed, dim.Value)}
			}
			return out
		})
		if admitted {
			continue
		}
		d.Dims = l.overflow
		tr.Altered[alterSeriesOverflow]++
		if over != nil {
			l.logger.Warn("A metric has more series than max_series_per_metric: its new series are folded into one series with dimension otel.metric.overflow=true (billed metrics stay bounded; remove or exclude the exploding dimension)",
				zap.String("metric", over.Metric), zap.Int("max_series_per_metric", l.max),
				zap.String("exploding_dimension", over.Dimension), zap.Int("distinct_values", over.Distinct))
		}
	}
}
