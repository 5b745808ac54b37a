// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package buildsim

import (
	"math"
	"sort"
	"strings"
	"time"
)

// Attribute keys of the build-service contract.
const (
	AttrJobID        = "build.job.id"
	AttrJobStatus    = "build.job.status"
	AttrJobResult    = "build.job.result"
	AttrStage        = "build.stage"
	AttrStageResult  = "build.stage.result"
	AttrEngine       = "build.engine"
	AttrDataType     = "build.data_type"
	AttrResult       = "build.result" // on derived metrics
	AttrRoute        = "http.route"
	AttrMethod       = "http.request.method"
	AttrStatusCode   = "http.response.status_code"
	AttrStatusClass  = "http.response.status_class" // on derived metrics
	AttrURLPath      = "url.path"
	AttrTenant       = "tenant.id"
	AttrGPUIndex     = "gpu.index"
	AttrGPUID        = "hw.id"
	AttrProcessPID   = "process.pid"
	AttrMetricSeries = "sim.series"
)

// Stat summarises durations in seconds, as a histogram's count, sum, min and
// max do.
type Stat struct {
	Count int64   `json:"count"`
	Sum   float64 `json:"sum"`
	Min   float64 `json:"min"`
	Max   float64 `json:"max"`
}

func (s *Stat) add(v float64) {
	if s.Count == 0 || v < s.Min {
		s.Min = v
	}
	if s.Count == 0 || v > s.Max {
		s.Max = v
	}
	s.Count++
	s.Sum += v
}

func (s *Stat) merge(o Stat) {
	if o.Count == 0 {
		return
	}
	if s.Count == 0 {
		*s = o
		return
	}
	s.Count += o.Count
	s.Sum += o.Sum
	s.Min = math.Min(s.Min, o.Min)
	s.Max = math.Max(s.Max, o.Max)
}

// Series is the ground truth for one attribute set of a derived metric pair:
// Count for the counter (build.jobs, build.stage.runs, api.requests) and
// Duration for its histogram. Duration.Count can be lower than Count when a
// run was counted from an end record whose start never arrived.
type Series struct {
	Attributes map[string]string `json:"attributes"`
	Count      int64             `json:"count"`
	Duration   Stat              `json:"duration_seconds"`
}

// Totals is what a correct collector derives from a set of telemetry.
type Totals struct {
	// Jobs: build.jobs and build.job.duration by build.result,
	// build.engine, build.data_type.
	Jobs []Series `json:"jobs"`
	// StageRuns: build.stage.runs and build.stage.duration by build.stage,
	// build.result, build.engine, build.data_type.
	StageRuns []Series `json:"stage_runs"`
	// APIRequests: api.requests and api.request.duration by http.route,
	// http.request.method, http.response.status_class.
	APIRequests []Series `json:"api_requests"`
	// JobsByResult is Jobs summed over everything but build.result.
	JobsByResult map[string]int64 `json:"jobs_by_result"`
	// DanglingStarts are runs whose start arrived but whose end did not: a
	// collector counts them as timeout after job_timeout, not in Jobs.
	DanglingStarts int64 `json:"dangling_starts"`
}

// Match sums the series whose attributes include every pair of want (an
// empty want sums everything).
func Match(series []Series, want map[string]string) Series {
	out := Series{Attributes: want}
	for _, s := range series {
		if !hasAll(s.Attributes, want) {
			continue
		}
		out.Count += s.Count
		out.Duration.merge(s.Duration)
	}
	return out
}

func hasAll(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// tally accumulates Series by attribute set.
type tally map[string]*Series

func attrKey(attrs map[string]string) string {
	keys := make([]string, 0, len(attrs))
	for k := range attrs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(attrs[k])
		b.WriteByte(0)
	}
	return b.String()
}

// add counts one occurrence; d < 0 means the duration is unknown.
func (t tally) add(attrs map[string]string, d time.Duration) {
	k := attrKey(attrs)
	s, ok := t[k]
	if !ok {
		s = &Series{Attributes: attrs}
		t[k] = s
	}
	s.Count++
	if d >= 0 {
		s.Duration.add(d.Seconds())
	}
}

func (t tally) sorted() []Series {
	keys := make([]string, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]Series, 0, len(keys))
	for _, k := range keys {
		out = append(out, *t[k])
	}
	return out
}

func jobAttrs(result, engine, dataType string) map[string]string {
	return map[string]string{AttrResult: result, AttrEngine: engine, AttrDataType: dataType}
}

func stageAttrs(stage, result, engine, dataType string) map[string]string {
	return map[string]string{AttrStage: stage, AttrResult: result, AttrEngine: engine, AttrDataType: dataType}
}

func apiAttrs(route, method string, code int) map[string]string {
	return map[string]string{AttrRoute: route, AttrMethod: method, AttrStatusClass: StatusClass(code)}
}

// jobSeen is what arrived of one run's job-level telemetry.
type jobSeen struct {
	engine, dataType, result string
	duration                 time.Duration
	span                     bool // the job span
	startLog, endLog         bool // RUNNING and COMPLETED/FAILED records
}

// counted applies the contract: a run is counted once when its span or its
// end record arrived; its duration is known from the span, or from both
// records.
func (j jobSeen) counted() (counted bool, d time.Duration) {
	switch {
	case j.span, j.startLog && j.endLog:
		return true, j.duration
	case j.endLog:
		return true, -1
	default:
		return false, -1
	}
}

// truthBuilder keeps the per-run state needed to derive Totals exactly,
// whichever subset of the telemetry arrived.
type truthBuilder struct {
	jobs   map[string]*jobSeen
	order  []string
	stages tally
	api    tally
}

func newTruthBuilder() *truthBuilder {
	return &truthBuilder{jobs: map[string]*jobSeen{}, stages: tally{}, api: tally{}}
}

func (b *truthBuilder) job(id string) *jobSeen {
	j, ok := b.jobs[id]
	if !ok {
		j = &jobSeen{}
		b.jobs[id] = j
		b.order = append(b.order, id)
	}
	return j
}

func (b *truthBuilder) totals() Totals {
	jobs := tally{}
	var dangling int64
	for _, id := range b.order {
		j := b.jobs[id]
		ok, d := j.counted()
		if !ok {
			if j.startLog {
				dangling++
			}
			continue
		}
		jobs.add(jobAttrs(j.result, j.engine, j.dataType), d)
	}
	t := Totals{Jobs: jobs.sorted(), StageRuns: b.stages.sorted(), APIRequests: b.api.sorted(), JobsByResult: map[string]int64{}, DanglingStarts: dangling}
	for _, s := range t.Jobs {
		t.JobsByResult[s.Attributes[AttrResult]] += s.Count
	}
	return t
}

// addPlanned records everything a plan makes the simulator emit with the
// given signals, as if the collector acknowledged all of it.
func (b *truthBuilder) addPlanned(j JobPlan, cfg Config) {
	if cfg.JobSpans || cfg.JobLogs {
		s := b.job(j.ID)
		s.engine, s.dataType, s.result, s.duration = j.Engine, j.DataType, j.Result, j.Duration
		s.span = cfg.JobSpans
		s.startLog = cfg.JobLogs
		s.endLog = cfg.JobLogs && endStatus(j.Result) != ""
	}
	if cfg.StageSpans {
		for _, st := range j.Stages {
			b.stages.add(stageAttrs(st.Stage, st.Result, j.Engine, j.DataType), st.Duration)
		}
	}
	if cfg.APISpans || (cfg.Metrics && cfg.APIMetrics) {
		for _, c := range j.API {
			b.api.add(apiAttrs(c.Route, c.Method, c.Status), c.Duration)
		}
	}
}

// endStatus is the status record that ends a run with result, or "" when
// the service writes none (a cancelled job is deleted from the store).
func endStatus(result string) string {
	switch result {
	case ResultSuccess:
		return StatusCompleted
	case ResultFailure:
		return StatusFailed
	default:
		return ""
	}
}

// SDKMetrics is the ground truth of the service's own SDK metrics.
type SDKMetrics struct {
	Counter   CounterTruth   `json:"counter"`
	Histogram HistogramTruth `json:"histogram"`
	Gauge     GaugeTruth     `json:"gauge"`
	// HTTPServerDuration is http.server.request.duration: one sample per
	// API call, in seconds.
	HTTPServerDuration HistogramTruth `json:"http_server_duration"`
}

// CounterTruth is the sum over every series and both process incarnations of
// what was added, which is what the deltas of a correct cumulative-to-delta
// conversion add up to.
type CounterTruth struct {
	Name   string `json:"name"`
	Unit   string `json:"unit"`
	Total  int64  `json:"total"`
	Series int    `json:"series"`
}

// HistogramTruth is every recorded value, over all series and incarnations.
type HistogramTruth struct {
	Name   string  `json:"name"`
	Unit   string  `json:"unit"`
	Count  int64   `json:"count"`
	Sum    float64 `json:"sum"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	Series int     `json:"series"`
}

// GaugeTruth says the gauge reports only values from Allowed.
type GaugeTruth struct {
	Name    string    `json:"name"`
	Unit    string    `json:"unit"`
	Allowed []float64 `json:"allowed_values"`
	Series  int       `json:"series"`
}

// SignalStats counts one signal's OTLP exports.
type SignalStats struct {
	Requests       int    `json:"requests"`
	RequestsFailed int    `json:"requests_failed"`
	Items          int64  `json:"items"`
	ItemsFailed    int64  `json:"items_failed"`
	LastError      string `json:"last_error,omitempty"`
}

func (s *SignalStats) record(items int, err error) {
	s.Requests++
	s.Items += int64(items)
	if err != nil {
		s.RequestsFailed++
		s.ItemsFailed += int64(items)
		s.LastError = err.Error()
	}
}

// ExportStats counts the OTLP exports of each signal; Items counts spans, log
// records or metric data points.
type ExportStats struct {
	Spans        SignalStats `json:"spans"`
	LogRecords   SignalStats `json:"log_records"`
	MetricPoints SignalStats `json:"metric_points"`
	// MetricFinalExportsFailed counts process incarnations whose last
	// metric export failed. Metric points are cumulative, so an earlier
	// failed export loses nothing once a later one succeeds; a failed last
	// export loses what was recorded since the last successful one.
	MetricFinalExportsFailed int `json:"metric_final_exports_failed"`
}

// Complete says whether the collector acknowledged everything: every span
// and log record export, and the last metric export of each incarnation.
func (e ExportStats) Complete() bool {
	return e.Spans.RequestsFailed == 0 && e.LogRecords.RequestsFailed == 0 && e.MetricFinalExportsFailed == 0
}

// Summary is the ground truth of one run, printed as JSON by cmd/buildsim.
type Summary struct {
	Protocol string `json:"protocol"`
	Endpoint string `json:"endpoint"`
	Seed     int64  `json:"seed"`
	Service  string `json:"service_name"`
	// Generated is what a correct collector derives from everything the
	// simulator emitted; Acknowledged from what the collector accepted.
	// They differ only when exports failed for good.
	Generated    Totals      `json:"generated"`
	Acknowledged Totals      `json:"acknowledged"`
	SDKMetrics   SDKMetrics  `json:"sdk_metrics"`
	Exports      ExportStats `json:"exports"`
	JobsEmitted  int         `json:"jobs_emitted"`
	Restarts     int         `json:"restarts"`
	Start        time.Time   `json:"start"`
	End          time.Time   `json:"end"`
	Elapsed      float64     `json:"elapsed_seconds"`
}
