// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package translate

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cumulativetest"
)

// testNow is the clock of the translation tests.
var testNow = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func ts(t time.Time) pcommon.Timestamp { return pcommon.NewTimestampFromTime(t) }

// at is testNow plus d, as a pdata timestamp.
func at(d time.Duration) pcommon.Timestamp { return ts(testNow.Add(d)) }

// testConfig is the exporter's default translation.
func testConfig() Config {
	return Config{ResourceToDimensions: DefaultResourceToDimensions(), StorageResolution: DefaultStorageResolution}
}

// The cumulative test metrics are shared with internal/cumulative's tests.
var (
	newMetric     = cumulativetest.NewMetric
	cumulativeSum = cumulativetest.Sum
	fillHistogram = cumulativetest.FillHistogram
)

func gaugeMetrics(name, unit string, values ...float64) pmetric.Metrics {
	md := pmetric.NewMetrics()
	dps := newMetric(md, name, unit).SetEmptyGauge().DataPoints()
	for _, v := range values {
		dp := dps.AppendEmpty()
		dp.SetTimestamp(at(0))
		dp.SetDoubleValue(v)
	}
	return md
}

func translateAll(cfg Config, md pmetric.Metrics) *Translation {
	tr := &Translation{}
	NewTranslator(cfg).Translate(md, testNow, tr)
	return tr
}

// cloudWatchStatistics is what CloudWatch computes from the datums of one
// data point: SampleCount, Sum, Minimum, Maximum.
func cloudWatchStatistics(ds []Datum) StatisticSet {
	var s StatisticSet
	first := true
	add := func(v, c float64) {
		if first {
			s.Min, s.Max, first = v, v, false
		}
		s.SampleCount += c
		s.Sum += v * c
		s.Min = min(s.Min, v)
		s.Max = max(s.Max, v)
	}
	for _, d := range ds {
		switch d.Kind {
		case KindValue:
			add(d.Value, 1)
		case KindValues:
			counts := d.Counts()
			for i, v := range d.Values() {
				add(v, counts[i])
			}
		case KindStatistics:
			st := d.Stats()
			if first {
				s.Min, s.Max, first = st.Min, st.Max, false
			}
			s.SampleCount += st.SampleCount
			s.Sum += st.Sum
			s.Min = min(s.Min, st.Min)
			s.Max = max(s.Max, st.Max)
		}
	}
	return s
}
