// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package intervalmergeprocessor

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"

	"github.com/gpubuild/otelcol-gpubuild/internal/pmetricutil"
)

// refuseOutOfRange removes the points whose timestamp is outside
// [now-max_age, now+max_ahead], counts them and logs each worker once per
// interval with its resource.
func (p *mergeProcessor) refuseOutOfRange(ctx context.Context, md pmetric.Metrics, now time.Time) {
	hi := pcommon.NewTimestampFromTime(now.Add(p.cfg.MaxAhead))
	lo := pcommon.NewTimestampFromTime(now.Add(-p.cfg.MaxAge))
	bad := func(ts pcommon.Timestamp) bool { return ts > hi || (ts != 0 && ts < lo) }
	md.ResourceMetrics().RemoveIf(func(rm pmetric.ResourceMetrics) bool {
		var refused int
		var example pcommon.Timestamp
		count := func(ts pcommon.Timestamp) bool {
			if bad(ts) {
				refused++
				example = ts
				return true
			}
			return false
		}
		rm.ScopeMetrics().RemoveIf(func(sm pmetric.ScopeMetrics) bool {
			sm.Metrics().RemoveIf(func(m pmetric.Metric) bool {
				switch m.Type() {
				case pmetric.MetricTypeGauge:
					m.Gauge().DataPoints().RemoveIf(func(dp pmetric.NumberDataPoint) bool { return count(dp.Timestamp()) })
				case pmetric.MetricTypeSum:
					m.Sum().DataPoints().RemoveIf(func(dp pmetric.NumberDataPoint) bool { return count(dp.Timestamp()) })
				case pmetric.MetricTypeHistogram:
					m.Histogram().DataPoints().RemoveIf(func(dp pmetric.HistogramDataPoint) bool { return count(dp.Timestamp()) })
				case pmetric.MetricTypeExponentialHistogram:
					m.ExponentialHistogram().DataPoints().RemoveIf(func(dp pmetric.ExponentialHistogramDataPoint) bool { return count(dp.Timestamp()) })
				case pmetric.MetricTypeSummary:
					m.Summary().DataPoints().RemoveIf(func(dp pmetric.SummaryDataPoint) bool { return count(dp.Timestamp()) })
				}
				return refused > 0 && pmetricutil.PointCount(m) == 0
			})
			return sm.Metrics().Len() == 0
		})
		if refused > 0 {
			p.tel.IntervalmergePointsOutOfRange.Add(ctx, int64(refused))
			p.warnOutOfRange(rm.Resource(), refused, example, now)
		}
		return rm.ScopeMetrics().Len() == 0
	})
}

func (p *mergeProcessor) warnOutOfRange(res pcommon.Resource, refused int, example pcommon.Timestamp, now time.Time) {
	worker := fmt.Sprint(res.Attributes().AsRaw())
	p.mu.Lock()
	first := !p.warned[worker]
	p.warned[worker] = true
	p.mu.Unlock()
	if !first {
		return
	}
	p.logger.Warn("Refused data points whose timestamp is too far from the gateway's clock (is this worker's clock wrong?); the worker's other points and every other worker's are taken",
		zap.Any("worker", res.Attributes().AsRaw()), zap.Int("points", refused),
		zap.Time("example_timestamp", example.AsTime()), zap.Time("gateway_time", now),
		zap.Duration("max_ahead", p.cfg.MaxAhead), zap.Duration("max_age", p.cfg.MaxAge))
}
