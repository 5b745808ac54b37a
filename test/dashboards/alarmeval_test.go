// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package dashboards

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
)

// evalAlarm evaluates a CloudWatch alarm of Metrics Insights queries and
// metric math (the pipeline-health alarms' shape) on the datums of one
// period [from, to), as CloudWatch would: each query aggregates the datums
// of its schema and conditions, a query without datums has no value (FILL
// gives it one), and the returned expression is compared with the
// threshold. It says ALARM, OK, or INSUFFICIENT_DATA (no value, which
// TreatMissingData notBreaching turns into OK).
func evalAlarm(props map[string]any, datums []cloudwatchtest.Datum, from, to time.Time) (string, float64, error) {
	values := map[string]float64{}
	var result float64
	returned := false
	for _, m := range props["Metrics"].([]any) {
		q := m.(map[string]any)
		id, expr := q["Id"].(string), q["Expression"].(string)
		var v float64
		var err error
		if strings.HasPrefix(expr, "SELECT ") {
			v, err = evalInsights(expr, datums, from, to)
		} else {
			v, err = evalMath(expr, values)
		}
		if err != nil {
			return "", 0, fmt.Errorf("%s: %w", id, err)
		}
		values[id] = v
		if q["ReturnData"] == true {
			result, returned = v, true
		}
	}
	if !returned {
		return "", 0, fmt.Errorf("no query returns data")
	}
	if math.IsNaN(result) {
		return "INSUFFICIENT_DATA", result, nil
	}
	threshold, err := strconv.ParseFloat(fmt.Sprint(props["Threshold"]), 64)
	if err != nil {
		return "", 0, err
	}
	var breach bool
	switch op := props["ComparisonOperator"]; op {
	case "GreaterThanThreshold":
		breach = result > threshold
	case "LessThanThreshold":
		breach = result < threshold
	default:
		return "", 0, fmt.Errorf("comparison %v", op)
	}
	if breach {
		return "ALARM", result, nil
	}
	return "OK", result, nil
}

var condRe = regexp.MustCompile(`^"([^"]+)" (=|!=) '([^']*)'$`)

// evalInsights is SELECT SUM|MAX("m") FROM SCHEMA("ns", "d", ...) [WHERE
// "d" = 'v' AND "d" != 'v']: NaN when no datum matches.
func evalInsights(q string, datums []cloudwatchtest.Datum, from, to time.Time) (float64, error) {
	m := insightsRe.FindStringSubmatch(q)
	if m == nil || m[6] != "" {
		return 0, fmt.Errorf("%q is not a query this evaluator reads", q)
	}
	var dims []string
	for _, d := range strings.Split(m[4], ",")[1:] {
		dims = append(dims, strings.Trim(strings.TrimSpace(d), `"`))
	}
	slices.Sort(dims)
	var conds [][]string
	if m[5] != "" {
		for _, c := range strings.Split(m[5], " AND ") {
			cm := condRe.FindStringSubmatch(c)
			if cm == nil {
				return 0, fmt.Errorf("cannot read condition %q", c)
			}
			conds = append(conds, cm[1:])
		}
	}
	out, found := 0.0, false
	for _, d := range datums {
		if d.Namespace != m[3] || d.MetricName != m[2] || d.Timestamp.Before(from) || !d.Timestamp.Before(to) ||
			!slices.Equal(slices.Sorted(maps.Keys(d.Dimensions)), dims) || d.Value == nil {
			continue
		}
		ok := true
		for _, c := range conds {
			ok = ok && (d.Dimensions[c[0]] == c[2]) == (c[1] == "=")
		}
		if !ok {
			continue
		}
		switch m[1] {
		case "SUM":
			out += *d.Value
		case "MAX":
			if !found || *d.Value > out {
				out = *d.Value
			}
		default:
			return 0, fmt.Errorf("%s is not a function this evaluator reads", m[1])
		}
		found = true
	}
	if !found {
		return math.NaN(), nil
	}
	return out, nil
}

// evalMath reads sums, differences, products and quotients of numbers, ids
// and FILL(id, number).
func evalMath(expr string, values map[string]float64) (float64, error) {
	tokens := regexp.MustCompile(`\s*([A-Za-z_][A-Za-z0-9_]*|[0-9.]+|[-+*/(),])`).FindAllStringSubmatch(expr, -1)
	var toks []string
	for _, t := range tokens {
		toks = append(toks, t[1])
	}
	if strings.Join(toks, "") != strings.ReplaceAll(expr, " ", "") {
		return 0, fmt.Errorf("cannot read %q", expr)
	}
	p := &mathParser{toks: toks, values: values}
	v, err := p.sum()
	if err == nil && p.pos != len(toks) {
		err = fmt.Errorf("cannot read %q past %q", expr, toks[p.pos])
	}
	return v, err
}

type mathParser struct {
	toks   []string
	pos    int
	values map[string]float64
}

func (p *mathParser) next() string {
	if p.pos < len(p.toks) {
		return p.toks[p.pos]
	}
	return ""
}

func (p *mathParser) sum() (float64, error) {
	v, err := p.product()
	for err == nil && (p.next() == "+" || p.next() == "-") {
		op := p.toks[p.pos]
		p.pos++
		var r float64
		if r, err = p.product(); op == "+" {
			v += r
		} else {
			v -= r
		}
	}
	return v, err
}

func (p *mathParser) product() (float64, error) {
	v, err := p.term()
	for err == nil && (p.next() == "*" || p.next() == "/") {
		op := p.toks[p.pos]
		p.pos++
		var r float64
		if r, err = p.term(); op == "*" {
			v *= r
		} else {
			v /= r
		}
	}
	return v, err
}

func (p *mathParser) term() (float64, error) {
	t := p.next()
	p.pos++
	switch {
	case t == "(":
		v, err := p.sum()
		if err == nil && p.next() != ")" {
			err = fmt.Errorf("missing )")
		}
		p.pos++
		return v, err
	case t == "FILL":
		if p.next() != "(" {
			return 0, fmt.Errorf("FILL without (")
		}
		p.pos++
		v, err := p.sum()
		if err != nil || p.next() != "," {
			return 0, fmt.Errorf("FILL: %v", err)
		}
		p.pos++
		fill, err := p.sum()
		if err != nil || p.next() != ")" {
			return 0, fmt.Errorf("FILL: %v", err)
		}
		p.pos++
		if math.IsNaN(v) {
			v = fill
		}
		return v, nil
	case regexp.MustCompile(`^[0-9.]+$`).MatchString(t):
		return strconv.ParseFloat(t, 64)
	case regexp.MustCompile(`^[a-z][A-Za-z0-9_]*$`).MatchString(t):
		v, ok := p.values[t]
		if !ok {
			return 0, fmt.Errorf("%q is not an id defined before", t)
		}
		return v, nil
	}
	return 0, fmt.Errorf("unexpected %q", t)
}
