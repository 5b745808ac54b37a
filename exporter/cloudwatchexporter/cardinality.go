// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter"

import (
	"hash/maphash"
	"time"

	"go.uber.org/zap"

	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/seriesbudget"
)

const (
	// overflowDimension is the one dimension of a metric's overflow series
	// (the OpenTelemetry SDKs' cardinality limit uses the same attribute).
	overflowDimension = "otel.metric.overflow"
	// seriesIdleTTL frees the budget place of a series not seen for this long.
	seriesIdleTTL = time.Hour
	// overflowWarnEvery rate-limits the warning, per metric.
	overflowWarnEvery = time.Minute
)

// seriesLimiter applies max_series_per_metric to translated datums.
type seriesLimiter struct {
	budget   *seriesbudget.Budget
	max      int
	seed     maphash.Seed
	overflow []dimension // the overflow series' dimensions; never modified
	logger   *zap.Logger
}

func newSeriesLimiter(maxSeries int, logger *zap.Logger) *seriesLimiter {
	if maxSeries <= 0 {
		return nil
	}
	return &seriesLimiter{
		budget:   seriesbudget.New(maxSeries, seriesIdleTTL, overflowWarnEvery),
		max:      maxSeries,
		seed:     maphash.MakeSeed(),
		overflow: []dimension{{overflowDimension, "true"}},
		logger:   logger,
	}
}

// apply folds the datums of series past their metric's budget into the
// metric's overflow series (same name, the one dimension
// otel.metric.overflow=true; CloudWatch aggregates them, so sums and counts
// are kept) and counts each folded point.
func (l *seriesLimiter) apply(tr *translation, now time.Time) {
	var h maphash.Hash
	h.SetSeed(l.seed)
	for i := range tr.datums {
		d := &tr.datums[i]
		if i > 0 && d.point == tr.datums[i-1].point {
			d.dims = tr.datums[i-1].dims // the same point: the same decision
			continue
		}
		h.Reset()
		h.WriteString(d.name)
		for _, dim := range d.dims {
			h.WriteByte(0)
			h.WriteString(dim.name)
			h.WriteByte(0)
			h.WriteString(dim.value)
		}
		admitted, over := l.budget.Admit(d.name, h.Sum64(), now, func() []seriesbudget.Dimension {
			out := make([]seriesbudget.Dimension, len(d.dims))
			for j, dim := range d.dims {
				out[j] = seriesbudget.Dimension{Name: dim.name, ValueHash: maphash.String(l.seed, dim.value)}
			}
			return out
		})
		if admitted {
			continue
		}
		d.dims = l.overflow
		tr.altered[alterSeriesOverflow]++
		if over != nil {
			l.logger.Warn("A metric has more series than max_series_per_metric: its new series are folded into one series with dimension otel.metric.overflow=true (billed metrics stay bounded; remove or exclude the exploding dimension)",
				zap.String("metric", over.Metric), zap.Int("max_series_per_metric", l.max),
				zap.String("exploding_dimension", over.Dimension), zap.Int("distinct_values", over.Distinct))
		}
	}
}
