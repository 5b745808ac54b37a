// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cumulative

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cumulativetest"
)

var testNow = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) pcommon.Timestamp { return pcommon.NewTimestampFromTime(testNow.Add(d)) }

var testConfig = Config{TTL: 30 * time.Minute, MaxSeries: 100, MaxAge: DefaultMaxAge, FutureTolerance: DefaultFutureTolerance}

func newObserved(cfg Config) (*Tracker, *observer.ObservedLogs) {
	core, logs := observer.New(zap.InfoLevel)
	return New(cfg, zap.New(core)), logs
}

// The test metrics are shared with the exporter's tests (same resource, so
// the same series keys as the format-1 fixtures).
var (
	newMetric     = cumulativetest.NewMetric
	cumulativeSum = cumulativetest.Sum
)

func cumulativeHistogram(start, ts pcommon.Timestamp, bounds []float64, counts []uint64, sum float64) pmetric.Metrics {
	md := pmetric.NewMetrics()
	h := newMetric(md, "latency", "s").SetEmptyHistogram()
	h.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	dp := h.DataPoints().AppendEmpty()
	dp.SetStartTimestamp(start)
	dp.SetTimestamp(ts)
	cumulativetest.FillHistogram(dp, bounds, counts, sum)
	return md
}

// sentSum is the single sum point left in md after conversion, if any.
func sentSum(t *testing.T, md pmetric.Metrics) (int64, bool) {
	t.Helper()
	dps := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints()
	if dps.Len() == 0 {
		return 0, false
	}
	if dps.Len() != 1 {
		t.Fatalf("%d points", dps.Len())
	}
	return dps.At(0).IntValue(), true
}

// convert converts md at now and saves the state when the tracker has storage.
func convert(t *testing.T, c *Tracker, md pmetric.Metrics, now time.Time) Result {
	t.Helper()
	var r Result
	c.Convert(context.Background(), md, now, &r)
	if err := c.Save(context.Background(), r.Records); err != nil {
		t.Fatal(err)
	}
	return r
}

type zapField = zap.Field

func zapString(k, v string) zap.Field { return zap.String(k, v) }

// intSnapshot and doubleSnapshot are sum points of value v.
func intSnapshot(start, ts pcommon.Timestamp, v int64) snapshot {
	p := snapshot{start: start, ts: ts}
	p.setIntValue(v)
	return p
}

func doubleSnapshot(start, ts pcommon.Timestamp, v float64) snapshot {
	p := snapshot{start: start, ts: ts}
	p.setValue(v)
	return p
}
