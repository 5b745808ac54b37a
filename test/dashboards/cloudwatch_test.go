// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package dashboards

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
)

var (
	cwDashboardPath = filepath.Join("deploy", "cloudwatch", "dashboard.json")
	cwTemplatePath  = filepath.Join("deploy", "cloudwatch", "gpubuild-cloudwatch.yaml")
)

// cwRef is one thing a dashboard widget or an alarm reads from CloudWatch.
type cwRef struct {
	where string
	// What to match: namespace and metric name; dims are the exact
	// dimension names of the series (nil: any); values the dimension values
	// it must have; terms free search terms, each equal to the namespace,
	// the metric name, a dimension name or a dimension value.
	namespace, metric string
	dims              []string
	values            map[string]string
	notValues         map[string]string // dimension values it must not have
	terms             []string
	// stat is a CloudWatch statistic: a percentile needs datums that carry
	// a distribution (Values and Counts).
	stat string
}

func (r cwRef) matches(d cloudwatchtest.Datum) bool {
	if d.Namespace != r.namespace || d.MetricName != r.metric {
		return false
	}
	if r.dims != nil && !slices.Equal(slices.Sorted(maps.Keys(d.Dimensions)), slices.Sorted(slices.Values(r.dims))) {
		return false
	}
	for k, v := range r.values {
		if d.Dimensions[k] != v {
			return false
		}
	}
	for k, v := range r.notValues {
		if d.Dimensions[k] == v {
			return false
		}
	}
	for _, term := range r.terms {
		found := term == d.Namespace || term == d.MetricName
		for k, v := range d.Dimensions {
			found = found || term == k || term == v
		}
		if !found {
			return false
		}
	}
	if strings.HasPrefix(r.stat, "p") && len(d.Values) == 0 {
		return false
	}
	return true
}

// missing returns the references no landed datum matches.
func missing(refs []cwRef, datums []cloudwatchtest.Datum) []string {
	var out []string
	for _, r := range refs {
		if !slices.ContainsFunc(datums, r.matches) {
			out = append(out, fmt.Sprintf("%s: no datum for %s %s dims %v values %v terms %v with statistic %s",
				r.where, r.namespace, r.metric, r.dims, r.values, r.terms, r.stat))
		}
	}
	return out
}

var (
	searchRe = regexp.MustCompile(`SEARCH\('([^']*)', *'([^']+)', *(\d+)\)`)
	schemaRe = regexp.MustCompile(`^\{([^}]*)\}\s*`)
	termRe   = regexp.MustCompile(`^(?:MetricName=)?"([^"]*)"\s*`)
	statRe   = regexp.MustCompile(`^(SampleCount|Sum|Average|Minimum|Maximum|p\d{1,2}(\.\d+)?)$`)
)

// searchRefs reads the SEARCH expressions of a metric math expression: an
// optional schema {namespace,"dim",...} (only series with exactly those
// dimensions), MetricName="..." and quoted exact-match terms.
func searchRefs(where, expr string) ([]cwRef, error) {
	var refs []cwRef
	for _, m := range searchRe.FindAllStringSubmatch(expr, -1) {
		q, stat := strings.TrimSpace(m[1]), m[2]
		if !statRe.MatchString(stat) {
			return nil, fmt.Errorf("%s: %q is not a statistic", where, stat)
		}
		r := cwRef{where: where, stat: stat}
		if s := schemaRe.FindStringSubmatch(q); s != nil {
			parts := strings.Split(s[1], ",")
			r.namespace = strings.Trim(parts[0], `"`)
			r.dims = []string{}
			for _, p := range parts[1:] {
				r.dims = append(r.dims, strings.Trim(p, `"`))
			}
			q = q[len(s[0]):]
		}
		for q != "" {
			t := termRe.FindStringSubmatch(q)
			if t == nil {
				return nil, fmt.Errorf("%s: cannot read search term at %q", where, q)
			}
			if strings.HasPrefix(q, "MetricName=") {
				r.metric = t[1]
			} else if r.namespace == "" && r.dims == nil && len(r.terms) == 0 {
				// A free search's first term names the namespace.
				r.namespace = t[1]
			} else {
				r.terms = append(r.terms, t[1])
			}
			q = q[len(t[0]):]
		}
		if r.metric == "" || r.namespace == "" {
			return nil, fmt.Errorf("%s: search %q names no namespace or metric", where, m[1])
		}
		refs = append(refs, r)
	}
	return refs, nil
}

type cwDashboard struct {
	Widgets []struct {
		Type       string `json:"type"`
		Properties struct {
			Title   string  `json:"title"`
			Region  string  `json:"region"`
			Metrics [][]any `json:"metrics"`
		} `json:"properties"`
	} `json:"widgets"`
}

// dashboardRefs reads every metric widget's expressions. Each widget must
// read something, and every expression either searches or does math on
// the ids of its widget.
func dashboardRefs(t testing.TB, body []byte, where string) []cwRef {
	t.Helper()
	var d cwDashboard
	require.NoError(t, json.Unmarshal(body, &d), where)
	var refs []cwRef
	metricWidgets := 0
	for _, w := range d.Widgets {
		if w.Type != "metric" {
			continue
		}
		metricWidgets++
		ids := map[string]bool{}
		var widgetRefs []cwRef
		for _, entry := range w.Properties.Metrics {
			require.Len(t, entry, 1, "%s widget %q: one expression per entry", where, w.Properties.Title)
			opts, _ := entry[0].(map[string]any)
			expr, _ := opts["expression"].(string)
			id, _ := opts["id"].(string)
			require.NotEmpty(t, expr, "%s widget %q", where, w.Properties.Title)
			require.Regexp(t, `^[a-z][a-zA-Z0-9_]*$`, id, "%s widget %q: an id CloudWatch accepts", where, w.Properties.Title)
			ids[id] = true
			r, err := searchRefs(fmt.Sprintf("%s widget %q", where, w.Properties.Title), expr)
			require.NoError(t, err)
			if len(r) == 0 {
				for _, ref := range regexp.MustCompile(`\b[a-z][a-zA-Z0-9_]*\b`).FindAllString(expr, -1) {
					require.True(t, ids[ref], "%s widget %q: %q uses %q, not an id defined before it", where, w.Properties.Title, expr, ref)
				}
			}
			widgetRefs = append(widgetRefs, r...)
		}
		require.NotEmpty(t, widgetRefs, "%s widget %q reads no metric", where, w.Properties.Title)
		refs = append(refs, widgetRefs...)
	}
	require.NotZero(t, metricWidgets, where)
	return refs
}

// insightsRe reads the Metrics Insights queries the alarms use:
// SELECT FN("metric") FROM SCHEMA("ns", "dim", ...) [WHERE "d" = 'v' AND ...]
// [GROUP BY "d"] [ORDER BY FN() ASC|DESC] [LIMIT n].
var (
	insightsRe = regexp.MustCompile(`^SELECT (SUM|AVG|MIN|MAX|COUNT)\("([^"]+)"\) FROM SCHEMA\("([^"]+)"((?:, *"[^"]+")*)\)(?: WHERE (.+?))?(?: GROUP BY "([^"]+)")?(?: ORDER BY (?:SUM|AVG|MIN|MAX|COUNT)\(\) (?:ASC|DESC))?(?: LIMIT \d+)?$`)
	whereRe    = regexp.MustCompile(`^"([^"]+)" (=|!=) '([^']*)'$`)
)

func insightsRef(where, q string) (cwRef, error) {
	m := insightsRe.FindStringSubmatch(q)
	if m == nil {
		return cwRef{}, fmt.Errorf("%s: %q is not a Metrics Insights query this test reads", where, q)
	}
	r := cwRef{where: where, stat: map[string]string{"SUM": "Sum", "AVG": "Average", "MIN": "Minimum", "MAX": "Maximum", "COUNT": "SampleCount"}[m[1]],
		metric: m[2], namespace: m[3], dims: []string{}, values: map[string]string{}, notValues: map[string]string{}}
	for _, d := range strings.Split(m[4], ",")[1:] {
		r.dims = append(r.dims, strings.Trim(strings.TrimSpace(d), `"`))
	}
	if m[5] != "" {
		for _, cond := range strings.Split(m[5], " AND ") {
			w := whereRe.FindStringSubmatch(cond)
			if w == nil {
				return cwRef{}, fmt.Errorf("%s: cannot read condition %q", where, cond)
			}
			if !slices.Contains(r.dims, w[1]) {
				return cwRef{}, fmt.Errorf("%s: condition on %q, not in the schema", where, w[1])
			}
			if w[2] == "=" {
				r.values[w[1]] = w[3]
			} else {
				r.notValues[w[1]] = w[3]
			}
		}
	}
	if m[6] != "" && !slices.Contains(r.dims, m[6]) {
		return cwRef{}, fmt.Errorf("%s: GROUP BY %q, not in the schema", where, m[6])
	}
	return r, nil
}

// cfnTemplate evaluates the CloudFormation intrinsics the template uses
// (Ref, Fn::Sub, Fn::If, Fn::Not, Fn::Equals, Fn::ForEach with &{}) for
// given parameter values, as CloudFormation would.
type cfnTemplate struct {
	params     map[string]any // string or []string
	conditions map[string]any
}

func (c *cfnTemplate) eval(v any, ids map[string]string) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 1 {
			for k, arg := range x {
				switch k {
				case "Ref":
					name := arg.(string)
					if id, ok := ids[name]; ok {
						return id, nil
					}
					if name == "AWS::NoValue" {
						return nil, nil
					}
					p, ok := c.params[name]
					if !ok {
						return nil, fmt.Errorf("Ref to unknown parameter %q", name)
					}
					return p, nil
				case "Fn::Sub":
					s, ok := arg.(string)
					if !ok {
						return nil, fmt.Errorf("Fn::Sub takes a string here")
					}
					return c.sub(s, ids)
				case "Fn::If":
					a := arg.([]any)
					cond, err := c.condition(a[0].(string))
					if err != nil {
						return nil, err
					}
					if cond {
						return c.eval(a[1], ids)
					}
					return c.eval(a[2], ids)
				}
			}
		}
		out := map[string]any{}
		for k, val := range x {
			if strings.HasPrefix(k, "Fn::ForEach::") {
				a := val.([]any)
				list, err := c.eval(a[1], ids)
				if err != nil {
					return nil, err
				}
				for _, item := range list.([]string) {
					inner := maps.Clone(ids)
					inner[a[0].(string)] = item
					body, err := c.eval(a[2], inner)
					if err != nil {
						return nil, err
					}
					for bk, bv := range body.(map[string]any) {
						out[c.logicalID(bk, inner)] = bv
					}
				}
				continue
			}
			e, err := c.eval(val, ids)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			if e != nil {
				out[k] = e
			}
		}
		return out, nil
	case []any:
		var out []any
		for _, item := range x {
			e, err := c.eval(item, ids)
			if err != nil {
				return nil, err
			}
			out = append(out, e)
		}
		return out, nil
	default:
		return v, nil
	}
}

var subRe = regexp.MustCompile(`\$\{([^}!]+)\}`)

func (c *cfnTemplate) sub(s string, ids map[string]string) (string, error) {
	var err error
	out := subRe.ReplaceAllStringFunc(s, func(m string) string {
		name := m[2 : len(m)-1]
		if id, ok := ids[name]; ok {
			return id
		}
		if name == "AWS::Region" {
			return "us-east-1"
		}
		v, ok := c.params[name].(string)
		if !ok {
			err = fmt.Errorf("Fn::Sub: ${%s} is not a string parameter", name)
		}
		return v
	})
	return out, err
}

// logicalID puts the ForEach identifiers' values, alphanumerics only, in
// place of &{id}.
func (c *cfnTemplate) logicalID(key string, ids map[string]string) string {
	for id, v := range ids {
		key = strings.ReplaceAll(key, "&{"+id+"}", regexp.MustCompile(`[^A-Za-z0-9]`).ReplaceAllString(v, ""))
	}
	return key
}

func (c *cfnTemplate) condition(name string) (bool, error) {
	def, ok := c.conditions[name]
	if !ok {
		return false, fmt.Errorf("unknown condition %q", name)
	}
	return c.evalCondition(def)
}

func (c *cfnTemplate) evalCondition(def any) (bool, error) {
	m := def.(map[string]any)
	if a, ok := m["Fn::Not"]; ok {
		b, err := c.evalCondition(a.([]any)[0])
		return !b, err
	}
	if a, ok := m["Fn::Equals"]; ok {
		l, err := c.eval(a.([]any)[0], nil)
		if err != nil {
			return false, err
		}
		r, err := c.eval(a.([]any)[1], nil)
		return fmt.Sprint(l) == fmt.Sprint(r), err
	}
	return false, fmt.Errorf("condition %v: not Fn::Not or Fn::Equals", def)
}

// loadTemplate evaluates the template for the workload's service, engines
// and data types (every other parameter at its default) and returns its
// resources.
func loadTemplate(t testing.TB, params map[string]any) map[string]map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(binarytest.RepoRoot(), cwTemplatePath))
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, yaml.Unmarshal(raw, &doc))
	c := &cfnTemplate{params: map[string]any{}, conditions: map[string]any{}}
	if cs, ok := doc["Conditions"].(map[string]any); ok {
		c.conditions = cs
	}
	for name, def := range doc["Parameters"].(map[string]any) {
		p := def.(map[string]any)
		if v, ok := params[name]; ok {
			c.params[name] = v
			continue
		}
		d, ok := p["Default"]
		require.True(t, ok, "parameter %s has no default and the test gives none", name)
		if p["Type"] == "CommaDelimitedList" {
			c.params[name] = strings.Split(fmt.Sprint(d), ",")
		} else {
			c.params[name] = fmt.Sprint(d)
		}
	}
	res, err := c.eval(doc["Resources"], map[string]string{})
	require.NoError(t, err)
	out := map[string]map[string]any{}
	for id, r := range res.(map[string]any) {
		require.Regexp(t, `^[A-Za-z0-9]+$`, id, "a logical id CloudFormation accepts")
		out[id] = r.(map[string]any)
	}
	return out
}

// alarmRefs reads what each alarm reads: a metric with its dimensions and
// statistic, or Metrics Insights queries and math on their ids.
func alarmRefs(t testing.TB, resources map[string]map[string]any) (refs []cwRef, alarms []string) {
	t.Helper()
	for id, r := range resources {
		if r["Type"] != "AWS::CloudWatch::Alarm" {
			continue
		}
		alarms = append(alarms, id)
		p := r["Properties"].(map[string]any)
		where := cwTemplatePath + " " + id
		if name, ok := p["MetricName"].(string); ok {
			ref := cwRef{where: where, namespace: p["Namespace"].(string), metric: name, dims: []string{}, values: map[string]string{}}
			for _, d := range p["Dimensions"].([]any) {
				dm := d.(map[string]any)
				ref.dims = append(ref.dims, dm["Name"].(string))
				ref.values[dm["Name"].(string)] = dm["Value"].(string)
			}
			ref.stat, _ = p["ExtendedStatistic"].(string)
			if s, ok := p["Statistic"].(string); ok {
				ref.stat = s
			}
			require.Regexp(t, statRe, ref.stat, where)
			refs = append(refs, ref)
			continue
		}
		metrics, ok := p["Metrics"].([]any)
		require.True(t, ok, "%s: neither MetricName nor Metrics", where)
		ids := map[string]bool{}
		returned := 0
		for _, m := range metrics {
			q := m.(map[string]any)
			qid := q["Id"].(string)
			expr := q["Expression"].(string)
			if q["ReturnData"] == true {
				returned++
			}
			if strings.HasPrefix(expr, "SELECT ") {
				ref, err := insightsRef(where, expr)
				require.NoError(t, err)
				refs = append(refs, ref)
			} else {
				for _, used := range regexp.MustCompile(`\b[a-z][a-zA-Z0-9_]*\b`).FindAllString(expr, -1) {
					require.True(t, ids[used], "%s: %q uses %q, not an id defined before it", where, expr, used)
				}
			}
			ids[qid] = true
		}
		require.Equal(t, 1, returned, "%s: an alarm watches exactly one query", where)
	}
	return refs, alarms
}
