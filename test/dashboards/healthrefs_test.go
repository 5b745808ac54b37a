// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package dashboards

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/confmap/pipelinetelemetry"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
)

// absentUntilLoss are the pipeline-health counters a healthy run never
// sends (the collector's delta counters send nothing until they move, and
// the intervalmerge ones only in a gateway). TestDashboardsAgainstRealOutput
// does not ask for their data, only that they are pipeline-health series;
// the other pipeline-health series must return data there, and
// TestCloudWatchRefusalShowsAsDatum lands a loss and evaluates the alarms.
var absentUntilLoss = []string{
	"otelcol_exporter_enqueue_failed_metric_points",
	"otelcol_exporter_send_failed_metric_points",
	"otelcol_receiver_refused_spans",
	"otelcol_admission_refused_requests",
	"otelcol_exporter_cloudwatch_points_dropped",
	"otelcol_fanout_points_dropped",
	"otelcol_intervalmerge_requests_refused",
	"otelcol_intervalmerge_requests_duplicate",
}

// isLossCounter: a CloudWatch or Prometheus (counter, _total) name of one
// of absentUntilLoss.
func isLossCounter(name string) bool {
	return slices.Contains(absentUntilLoss, strings.TrimSuffix(name, "_total"))
}

// promName is a pipeline-health series' name at the Prometheus
// destinations: counters get _total, the gauges keep their names.
func promName(series string) string {
	if strings.HasPrefix(series, "otelcol_exporter_queue_") {
		return series
	}
	return series + "_total"
}

// landedOrLoss is missing() for references that may read a loss counter:
// those need no landed datum.
func landedOrLoss(refs []cwRef, datums []cloudwatchtest.Datum) []string {
	return missing(slices.DeleteFunc(slices.Clone(refs), func(r cwRef) bool { return isLossCounter(r.metric) }), datums)
}

// onlyLossCounters reports whether every selector of a PromQL expression
// reads a loss counter: its emptiness says nothing in a healthy run.
func onlyLossCounters(expr string) bool {
	ast, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return false
	}
	only, seen := true, false
	parser.Inspect(ast, func(node parser.Node, _ []parser.Node) error {
		if sel, ok := node.(*parser.VectorSelector); ok {
			seen = true
			only = only && (isLossCounter(sel.Name) || isFailedRequests(sel))
		}
		return nil
	})
	return seen && only
}

// isFailedRequests: PutMetricData requests with an outcome other than
// success, absent while CloudWatch takes every request.
func isFailedRequests(sel *parser.VectorSelector) bool {
	name := sel.Name
	for _, m := range sel.LabelMatchers {
		if m.Name == model.MetricNameLabel {
			name = m.Value
		}
	}
	if strings.TrimSuffix(name, "_total") != "otelcol_exporter_cloudwatch_requests" {
		return false
	}
	for _, m := range sel.LabelMatchers {
		if m.Name == "outcome" && m.Type == labels.MatchNotEqual && m.Value == "success" {
			return true
		}
	}
	return false
}

func TestLossCountersArePipelineHealthSeries(t *testing.T) {
	for _, name := range absentUntilLoss {
		require.Contains(t, pipelinetelemetry.Series, name)
	}
}

// Every pipeline-health series has a panel in the Grafana and the
// CloudWatch dashboards, and a Prometheus alert, a CloudWatch alarm and a
// CloudWatch PromQL alarm use it; nothing there reads an otelcol_ series that is not sent.
func TestPipelineHealthOnEveryDashboard(t *testing.T) {
	ruleExprs, _ := loadRules(t)
	grafanaExprs, _ := loadGrafana(t)
	cwBody, err := os.ReadFile(filepath.Join(binarytest.RepoRoot(), cwDashboardPath))
	require.NoError(t, err)
	cwRefs := dashboardRefs(t, cwBody, cwDashboardPath)
	alarms, _ := alarmRefs(t, loadTemplate(t, map[string]any{"ServiceName": serviceName}))

	var inRules, inGrafana, inPromQLAlarms []string
	for _, ast := range loadPromQLAlarms(t) {
		inPromQLAlarms = append(inPromQLAlarms, ast.String())
	}
	for _, e := range ruleExprs {
		inRules = append(inRules, e.expr)
	}
	for _, e := range grafanaExprs {
		inGrafana = append(inGrafana, e.expr)
	}
	uses := func(exprs []string, name string) bool {
		re := regexp.MustCompile(`\b` + name + `\b`)
		return slices.ContainsFunc(exprs, re.MatchString)
	}
	for _, s := range pipelinetelemetry.Series {
		require.True(t, uses(inGrafana, promName(s)), "%s (%s): no Grafana panel", s, promName(s))
		require.True(t, uses(inRules, promName(s)), "%s (%s): no Prometheus alert", s, promName(s))
		require.True(t, refsMetric(cwRefs, s), "%s: no CloudWatch dashboard widget", s)
		require.True(t, refsMetric(alarms, s), "%s: no CloudWatch alarm", s)
		require.True(t, uses(inPromQLAlarms, s), "%s: no CloudWatch PromQL alarm (cloudwatch-otlp)", s)
	}
	sent := map[string]bool{}
	for _, s := range pipelinetelemetry.Series {
		sent[s], sent[promName(s)] = true, true
	}
	otelcolRe := regexp.MustCompile(`\botelcol_[a-z_]+`)
	for _, e := range append(inRules, inGrafana...) {
		for _, n := range otelcolRe.FindAllString(e, -1) {
			require.True(t, sent[n], "%q reads %s, not a pipeline-health series", e, n)
		}
	}
	for _, r := range append(cwRefs, alarms...) {
		if strings.HasPrefix(r.metric, "otelcol_") {
			require.True(t, sent[r.metric], "%s reads %s, not a pipeline-health series", r.where, r.metric)
		}
	}
}
