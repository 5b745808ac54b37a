// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package dashboards

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"

	"github.com/gpubuild/otelcol-gpubuild/internal/confmap/pipelinetelemetry"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
)

var promQLAlarmsDir = filepath.Join("deploy", "cloudwatch", "promql-alarms")

// otlpSink stands in for CloudWatch's OTLP endpoint: it keeps, per metric
// name, every value of every resource and data point attribute it got.
type otlpSink struct {
	URL string
	mu  sync.Mutex
	// metric name -> "@resource.<key>" or "<key>" -> values
	labels map[string]map[string]map[string]bool
}

func startOTLPSink(t testing.TB) *otlpSink {
	t.Helper()
	s := &otlpSink{labels: map[string]map[string]map[string]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	s.URL = "http://" + ln.Addr().String()
	return s
}

func (s *otlpSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err == nil && r.Header.Get("Content-Encoding") == "gzip" {
		var zr *gzip.Reader
		if zr, err = gzip.NewReader(bytes.NewReader(body)); err == nil {
			body, err = io.ReadAll(zr)
		}
	}
	req := pmetricotlp.NewExportRequest()
	if err == nil {
		err = req.UnmarshalProto(body)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rms := req.Metrics().ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		res := rms.At(i).Resource().Attributes()
		sms := rms.At(i).ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				add := func(key, value string) {
					if s.labels[m.Name()] == nil {
						s.labels[m.Name()] = map[string]map[string]bool{}
					}
					if s.labels[m.Name()][key] == nil {
						s.labels[m.Name()][key] = map[string]bool{}
					}
					s.labels[m.Name()][key][value] = true
				}
				for key, v := range res.All() {
					add("@resource."+key, v.AsString())
				}
				switch m.Type() {
				case pmetric.MetricTypeSum:
					pointAttrs(m.Sum().DataPoints().Len(), func(p int) pcommon.Map { return m.Sum().DataPoints().At(p).Attributes() }, add)
				case pmetric.MetricTypeGauge:
					pointAttrs(m.Gauge().DataPoints().Len(), func(p int) pcommon.Map { return m.Gauge().DataPoints().At(p).Attributes() }, add)
				case pmetric.MetricTypeHistogram:
					pointAttrs(m.Histogram().DataPoints().Len(), func(p int) pcommon.Map { return m.Histogram().DataPoints().At(p).Attributes() }, add)
				default:
					add("", "")
				}
			}
		}
	}
	resp, _ := pmetricotlp.NewExportResponse().MarshalProto()
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(resp)
}

func pointAttrs(n int, at func(int) pcommon.Map, add func(key, value string)) {
	for p := 0; p < n; p++ {
		for key, v := range at(p).All() {
			add(key, v.AsString())
		}
	}
}

// unknown returns what a PromQL alarm's query names that the sink never
// received: a metric, a label, or a label matcher no received value
// satisfies. Labels in by/on clauses must be on every metric of the query.
func (s *otlpSink) unknown(where string, ast parser.Expr) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out, metrics []string
	var grouping []string
	parser.Inspect(ast, func(node parser.Node, _ []parser.Node) error {
		switch n := node.(type) {
		case *parser.VectorSelector:
			name := ""
			for _, m := range n.LabelMatchers {
				if m.Name == model.MetricNameLabel {
					name = m.Value
				}
			}
			got, ok := s.labels[name]
			if (!ok && isLossCounter(name)) || isFailedRequests(n) {
				return nil // pipeline-health losses: absent while nothing is lost
			}
			if !ok {
				out = append(out, fmt.Sprintf("%s: no metric %q received", where, name))
				return nil
			}
			metrics = append(metrics, name)
			for _, m := range n.LabelMatchers {
				if m.Name == model.MetricNameLabel {
					continue
				}
				found := false
				for v := range got[m.Name] {
					found = found || m.Matches(v)
				}
				if !found {
					out = append(out, fmt.Sprintf("%s: %q never had %s", where, name, m))
				}
			}
		case *parser.AggregateExpr:
			grouping = append(grouping, n.Grouping...)
		case *parser.BinaryExpr:
			if n.VectorMatching != nil {
				grouping = append(grouping, n.VectorMatching.MatchingLabels...)
			}
		}
		return nil
	})
	for _, g := range grouping {
		for _, m := range metrics {
			if _, ok := s.labels[m][g]; !ok {
				out = append(out, fmt.Sprintf("%s: %q has no label %q to group or match on", where, m, g))
			}
		}
	}
	return out
}

// prometheusNames are the names the Prometheus destinations give the
// metrics the PromQL alarms read (test/dashboards checks those names
// against the Prometheus servers too).
var prometheusNames = map[string]string{
	"build.jobs":          "build_jobs_total",
	"api.requests":        "api_requests_total",
	"hw.gpu.memory.limit": "hw_gpu_memory_limit_bytes",
	"hw.temperature":      "hw_temperature_celsius",
	"hw.errors":           "hw_errors_total",
}

var labelChars = regexp.MustCompile(`[^a-zA-Z0-9_]`)

func prometheusLabel(l string) string {
	return labelChars.ReplaceAllString(strings.TrimPrefix(l, "@resource."), "_")
}

// toPrometheus rewrites a CloudWatch PromQL query (OpenTelemetry names,
// "@resource." labels) into the names of the Prometheus destinations, so
// that the same alarm can be evaluated on what the sidecar sent there.
func toPrometheus(ast parser.Expr) (string, error) {
	var err error
	parser.Inspect(ast, func(node parser.Node, _ []parser.Node) error {
		switch n := node.(type) {
		case *parser.VectorSelector:
			for i, m := range n.LabelMatchers {
				if m.Name == model.MetricNameLabel {
					name, ok := prometheusNames[m.Value]
					if !ok && slices.Contains(pipelinetelemetry.Series, m.Value) {
						name, ok = promName(m.Value), true
					}
					if !ok {
						err = fmt.Errorf("no Prometheus name for %q", m.Value)
						return err
					}
					n.LabelMatchers[i], _ = labels.NewMatcher(m.Type, m.Name, name)
					n.Name = name
					continue
				}
				n.LabelMatchers[i], _ = labels.NewMatcher(m.Type, prometheusLabel(m.Name), m.Value)
			}
		case *parser.AggregateExpr:
			for i, g := range n.Grouping {
				n.Grouping[i] = prometheusLabel(g)
			}
		case *parser.BinaryExpr:
			if n.VectorMatching != nil {
				for i, g := range n.VectorMatching.MatchingLabels {
					n.VectorMatching.MatchingLabels[i] = prometheusLabel(g)
				}
			}
		}
		return nil
	})
	return ast.String(), err
}

type promQLAlarm struct {
	AlarmName          string `json:"AlarmName"`
	AlarmDescription   string `json:"AlarmDescription"`
	EvaluationCriteria struct {
		PromQLCriteria struct {
			Query          string `json:"Query"`
			PendingPeriod  *int   `json:"PendingPeriod"`
			RecoveryPeriod *int   `json:"RecoveryPeriod"`
		} `json:"PromQLCriteria"`
	} `json:"EvaluationCriteria"`
	EvaluationInterval int `json:"EvaluationInterval"`
}

// expectedPromQLAlarms are the CloudWatch PromQL alarms the workload makes
// breach: the same conditions as expectedAlerts.
var expectedPromQLAlarms = []string{"gpubuild-api-5xx-rate-high", "gpubuild-build-success-rate-low", "gpubuild-build-timed-out"}

func loadPromQLAlarms(t testing.TB) map[string]parser.Expr {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(binarytest.RepoRoot(), promQLAlarmsDir, "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	out := map[string]parser.Expr{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		var a promQLAlarm
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		require.NoError(t, dec.Decode(&a), f)
		require.Equal(t, strings.TrimSuffix(filepath.Base(f), ".json"), a.AlarmName, f)
		require.Positive(t, a.EvaluationInterval, f)
		require.NotNil(t, a.EvaluationCriteria.PromQLCriteria.PendingPeriod, f)
		ast, err := parser.NewParser(parser.Options{}).ParseExpr(a.EvaluationCriteria.PromQLCriteria.Query)
		require.NoError(t, err, f)
		out[a.AlarmName] = ast
	}
	return out
}

// checkPromQLAlarms: every name a CloudWatch PromQL alarm reads arrived at
// the CloudWatch OTLP endpoint, and the same query on the Prometheus
// destination's names breaches exactly for the expected alarms.
func checkPromQLAlarms(t *testing.T, sink *otlpSink, prom *prometheusServer) {
	alarms := loadPromQLAlarms(t)
	var unknown []string
	for name, ast := range alarms {
		unknown = append(unknown, sink.unknown(name, ast)...)
	}
	require.Empty(t, unknown, "CloudWatch PromQL alarms on names the sidecar did not send to cloudwatch-otlp")
	var breaching []string
	for name, ast := range alarms {
		q, err := toPrometheus(ast)
		require.NoError(t, err, name)
		samples, err := prom.query(q)
		require.NoError(t, err, "%s as %s", name, q)
		if len(samples) > 0 {
			breaching = append(breaching, name)
		}
	}
	slices.Sort(breaching)
	require.Equal(t, expectedPromQLAlarms, breaching, "CloudWatch PromQL alarms breaching on the workload")
}
