// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter

import (
	"strings"
	"time"

	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/metadata"
	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/translate"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cumulativetest"
)

// testNow is the clock of the translation tests.
var testNow = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func ts(t time.Time) pcommon.Timestamp { return pcommon.NewTimestampFromTime(t) }

// at is testNow plus d, as a pdata timestamp.
func at(d time.Duration) pcommon.Timestamp { return ts(testNow.Add(d)) }

func testConfig() *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.Namespace = "Test"
	// The tests of other concerns send thousands of series of one metric;
	// the series budget has its own tests.
	cfg.MaxSeriesPerMetric = 0
	return cfg
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

func translateAll(cfg *Config, md pmetric.Metrics) *translate.Translation {
	tr := &translate.Translation{}
	translate.NewTranslator(translatorConfig(cfg)).Translate(md, testNow, tr)
	return tr
}

func exporterSettings() exporter.Settings { return exportertest.NewNopSettings(metadata.Type) }

// withoutInMemoryNotice leaves out the line an exporter without
// state.storage logs at start (its cumulative state is in memory only),
// for the tests that count what else it logged.
func withoutInMemoryNotice(logs *observer.ObservedLogs) *observer.ObservedLogs {
	return logs.Filter(func(e observer.LoggedEntry) bool { return !strings.Contains(e.Message, "in memory only") })
}
