// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package dashboards

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
)

// rulesPath, grafanaPath: the shipped Prometheus rules and Grafana dashboard.
var (
	rulesPath   = filepath.Join("deploy", "prometheus", "gpubuild-rules.yaml")
	grafanaPath = filepath.Join("deploy", "grafana", "gpubuild-dashboard.json")
)

// promExpr is one PromQL expression a shipped file holds.
type promExpr struct {
	where string // file and rule or panel, for messages
	expr  string
	// alert: an alerting rule's condition, empty until it fires; its
	// operands are checked instead of the whole expression.
	alert bool
}

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Record string `yaml:"record"`
			Alert  string `yaml:"alert"`
			Expr   string `yaml:"expr"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func loadRules(t testing.TB) (exprs []promExpr, alerts []string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(binarytest.RepoRoot(), rulesPath))
	require.NoError(t, err)
	var f ruleFile
	require.NoError(t, yaml.Unmarshal(raw, &f))
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			name := r.Record
			if r.Alert != "" {
				name = r.Alert
				alerts = append(alerts, r.Alert)
			}
			exprs = append(exprs, promExpr{where: rulesPath + " " + name, expr: r.Expr, alert: r.Alert != ""})
			if r.Record != "" {
				// The server evaluated the rule and stored its result.
				exprs = append(exprs, promExpr{where: rulesPath + " " + name + " (recorded)", expr: r.Record})
			}
		}
	}
	require.NotEmpty(t, exprs)
	return exprs, alerts
}

// rulesWithoutFor is the rules file with every alert's `for` removed, so that
// a run of a minute shows which alerts the workload makes fire.
func rulesWithoutFor(t testing.TB) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(binarytest.RepoRoot(), rulesPath))
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, yaml.Unmarshal(raw, &doc))
	for _, g := range doc["groups"].([]any) {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			delete(r.(map[string]any), "for")
		}
	}
	out, err := yaml.Marshal(doc)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "rules.yaml")
	require.NoError(t, os.WriteFile(path, out, 0o600))
	return path
}

// grafanaVariables are what Grafana puts in place of the dashboard's
// variables: every service and host (the variables' "All", allValue .*) and
// a rate window long enough to hold the whole workload.
var grafanaVariables = strings.NewReplacer(
	"$__rate_interval", "5m",
	"${service}", ".*", "$service", ".*",
	"${host}", ".*", "$host", ".*",
)

type grafanaDashboard struct {
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		Title   string `json:"title"`
		Type    string `json:"type"`
		Targets []struct {
			Expr       string `json:"expr"`
			Datasource struct {
				UID string `json:"uid"`
			} `json:"datasource"`
		} `json:"targets"`
		Datasource *struct {
			UID string `json:"uid"`
		} `json:"datasource"`
	} `json:"panels"`
}

// loadGrafana returns the dashboard's panel queries and its label_values
// variables as (metric, label).
func loadGrafana(t testing.TB) (exprs []promExpr, labelValues [][2]string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(binarytest.RepoRoot(), grafanaPath))
	require.NoError(t, err)
	var d grafanaDashboard
	require.NoError(t, json.Unmarshal(raw, &d))
	hasDatasource := false
	labelValuesRe := regexp.MustCompile(`^label_values\(([a-zA-Z_:][a-zA-Z0-9_:]*), *([a-zA-Z_][a-zA-Z0-9_]*)\)$`)
	for _, v := range d.Templating.List {
		switch v.Type {
		case "datasource":
			hasDatasource = hasDatasource || v.Name == "datasource"
		case "query":
			m := labelValuesRe.FindStringSubmatch(v.Definition)
			require.NotNil(t, m, "variable %s: %q is not label_values(metric, label)", v.Name, v.Definition)
			labelValues = append(labelValues, [2]string{m[1], m[2]})
		}
	}
	require.True(t, hasDatasource, "the dashboard has no datasource variable")
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		require.NotEmpty(t, p.Targets, "panel %q has no query", p.Title)
		require.NotNil(t, p.Datasource, "panel %q", p.Title)
		require.Equal(t, "${datasource}", p.Datasource.UID, "panel %q: the datasource is the variable", p.Title)
		for _, tg := range p.Targets {
			require.Equal(t, "${datasource}", tg.Datasource.UID, "panel %q", p.Title)
			exprs = append(exprs, promExpr{where: fmt.Sprintf("%s panel %q", grafanaPath, p.Title), expr: grafanaVariables.Replace(tg.Expr)})
		}
	}
	return exprs, labelValues
}

// promChecks is what must return data for an expression: its selectors
// (each names metrics and labels the sidecar must have sent), the operand of
// each comparison with a number, and (not for alerts) the whole expression.
func promChecks(e promExpr) ([]string, error) {
	ast, err := parser.NewParser(parser.Options{}).ParseExpr(e.expr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", e.where, err)
	}
	var checks []string
	parser.Inspect(ast, func(node parser.Node, _ []parser.Node) error {
		switch n := node.(type) {
		case *parser.VectorSelector:
			sel := *n
			sel.OriginalOffset, sel.Offset, sel.Timestamp = 0, 0, nil
			// A series seen within the window of the longest range the
			// rules use is data the expression can read.
			checks = append(checks, fmt.Sprintf("last_over_time(%s[1h])", sel.String()))
		case *parser.BinaryExpr:
			if !n.Op.IsComparisonOperator() || n.ReturnBool {
				break
			}
			if isNumber(n.RHS) {
				checks = append(checks, n.LHS.String())
			} else if isNumber(n.LHS) {
				checks = append(checks, n.RHS.String())
			}
		}
		return nil
	})
	if !e.alert {
		checks = append(checks, ast.String())
	}
	return checks, nil
}

func isNumber(e parser.Expr) bool {
	switch n := e.(type) {
	case *parser.NumberLiteral:
		return true
	case *parser.ParenExpr:
		return isNumber(n.Expr)
	case *parser.BinaryExpr:
		return isNumber(n.LHS) && isNumber(n.RHS)
	}
	return false
}

// finite reports whether an answer holds a sample that is a number: a
// quantile of a histogram that did not move is NaN, which a panel shows
// as nothing.
func finite(samples []promSample) bool {
	for _, s := range samples {
		if v, ok := s.float(); ok && !math.IsNaN(v) && !math.IsInf(v, 0) {
			return true
		}
	}
	return false
}

// emptyQueries runs every check of every expression against p and returns
// the ones that returned no number.
func emptyQueries(p *prometheusServer, exprs []promExpr) []string {
	var empty []string
	for _, e := range exprs {
		checks, err := promChecks(e)
		if err != nil {
			empty = append(empty, err.Error())
			continue
		}
		for _, c := range checks {
			samples, err := p.query(c)
			if err == nil && !finite(samples) && onlyLossCounters(c) {
				continue // a pipeline-health loss counter: absent while nothing is lost
			}
			if err != nil || !finite(samples) {
				empty = append(empty, fmt.Sprintf("%s: %s returned no data (err %v)", e.where, c, err))
			}
		}
	}
	return empty
}
