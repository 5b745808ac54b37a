// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package buildsim

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// recorder is an in-memory collector: it keeps what it accepts and can
// refuse exports. Tests derive their expectations from what it kept, never
// from the simulator's own accounting.
type recorder struct {
	mu          sync.Mutex
	spans       []sdktrace.ReadOnlySpan
	logs        []sdklog.Record
	points      []point
	failSpans   func(call int) bool
	failLogs    func(call int) bool
	failMetrics bool
	spanCalls   int
	logCalls    int
	factories   int
	// logCall is the export call that carried each job's status record,
	// keyed "id/status".
	logCall map[string]int
	// maxPoints is the most data points one metric export carried.
	maxPoints int
}

func (r *recorder) factory(context.Context, Config) (Exporters, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.factories++
	inc := r.factories
	return Exporters{Span: spanRec{r}, Log: logRec{r}, Metric: &metricRec{r: r, incarnation: inc}}, nil
}

type spanRec struct{ r *recorder }

func (e spanRec) ExportSpans(_ context.Context, s []sdktrace.ReadOnlySpan) error {
	e.r.mu.Lock()
	defer e.r.mu.Unlock()
	e.r.spanCalls++
	if e.r.failSpans != nil && e.r.failSpans(e.r.spanCalls) {
		return errors.New("refused")
	}
	e.r.spans = append(e.r.spans, s...)
	return nil
}

func (spanRec) Shutdown(context.Context) error { return nil }

type logRec struct{ r *recorder }

func (e logRec) Export(_ context.Context, recs []sdklog.Record) error {
	e.r.mu.Lock()
	defer e.r.mu.Unlock()
	e.r.logCalls++
	if e.r.failLogs != nil && e.r.failLogs(e.r.logCalls) {
		return errors.New("refused")
	}
	for _, rec := range recs {
		e.r.logs = append(e.r.logs, rec.Clone())
		var id, status string
		rec.WalkAttributes(func(kv attribute.KeyValue) bool {
			switch string(kv.Key) {
			case AttrJobID:
				id = kv.Value.AsString()
			case AttrJobStatus:
				status = kv.Value.AsString()
			}
			return true
		})
		if e.r.logCall == nil {
			e.r.logCall = map[string]int{}
		}
		e.r.logCall[id+"/"+status] = e.r.logCalls
	}
	return nil
}

func (logRec) Shutdown(context.Context) error { return nil }

func (logRec) ForceFlush(context.Context) error { return nil }

type metricRec struct {
	r           *recorder
	incarnation int
}

// maxPointsPerExport is the most points one metric export carried.
func (r *recorder) maxPointsPerExport() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.maxPoints
}

func (m *metricRec) Temporality(k sdkmetric.InstrumentKind) metricdata.Temporality {
	return sdkmetric.DefaultTemporalitySelector(k)
}

func (m *metricRec) Aggregation(k sdkmetric.InstrumentKind) sdkmetric.Aggregation {
	return sdkmetric.DefaultAggregationSelector(k)
}

func (m *metricRec) ForceFlush(context.Context) error { return nil }

func (m *metricRec) Shutdown(context.Context) error { return nil }

func (m *metricRec) Export(_ context.Context, rm *metricdata.ResourceMetrics) error {
	m.r.mu.Lock()
	defer m.r.mu.Unlock()
	if m.r.failMetrics {
		return errors.New("refused")
	}
	m.r.maxPoints = max(m.r.maxPoints, countPoints(rm))
	attrs := func(s attribute.Set) map[string]string {
		out := map[string]string{}
		for _, kv := range s.ToSlice() {
			out[string(kv.Key)] = kv.Value.String()
		}
		return out
	}
	for _, sm := range rm.ScopeMetrics {
		for _, md := range sm.Metrics {
			base := point{incarnation: m.incarnation, name: md.Name, unit: md.Unit}
			switch d := md.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					p := base
					p.attrs, p.start, p.time, p.value = attrs(dp.Attributes), dp.StartTime, dp.Time, float64(dp.Value)
					m.r.points = append(m.r.points, p)
				}
			case metricdata.Gauge[float64]:
				for _, dp := range d.DataPoints {
					p := base
					p.attrs, p.start, p.time, p.value = attrs(dp.Attributes), dp.StartTime, dp.Time, dp.Value
					m.r.points = append(m.r.points, p)
				}
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					p := base
					p.attrs, p.start, p.time, p.value, p.count = attrs(dp.Attributes), dp.StartTime, dp.Time, dp.Sum, dp.Count
					p.min, _ = dp.Min.Value()
					p.max, _ = dp.Max.Value()
					m.r.points = append(m.r.points, p)
				}
			}
		}
	}
	return nil
}

// derive applies the contract to what the recorder kept, independently of
// the simulator's accounting: the job span or the end record counts a run;
// the duration comes from the span or from both records.
func (r *recorder) derive(t *testing.T) Totals {
	t.Helper()
	type run struct {
		result, engine, dataType string
		span                     bool
		spanDur                  time.Duration
		start, end               time.Time
	}
	runs := map[string]*run{}
	get := func(id string) *run {
		if runs[id] == nil {
			runs[id] = &run{}
		}
		return runs[id]
	}
	stages, api := tally{}, tally{}
	for _, s := range r.spans {
		a := map[string]attribute.Value{}
		for _, kv := range s.Attributes() {
			a[string(kv.Key)] = kv.Value
		}
		d := s.EndTime().Sub(s.StartTime())
		require.Zero(t, d%DurationQuantum, "span %s duration %v is not a whole quantum", s.Name(), d)
		resultOf := func(key string) string {
			if v, ok := a[key]; ok {
				return v.AsString()
			}
			if s.Status().Code == codes.Error {
				return ResultFailure
			}
			return ResultSuccess
		}
		switch {
		case s.SpanKind() == trace.SpanKindServer:
			api.add(apiAttrs(a[AttrRoute].AsString(), a[AttrMethod].AsString(), int(a[AttrStatusCode].AsInt64())), d)
		case a[AttrStage].AsString() != "":
			stages.add(stageAttrs(a[AttrStage].AsString(), resultOf(AttrStageResult), a[AttrEngine].AsString(), a[AttrDataType].AsString()), d)
		case a[AttrJobID].AsString() != "":
			j := get(a[AttrJobID].AsString())
			j.span, j.spanDur = true, d
			j.result, j.engine, j.dataType = resultOf(AttrJobResult), a[AttrEngine].AsString(), a[AttrDataType].AsString()
		}
	}
	for _, rec := range r.logs {
		var id, status, engine, dataType string
		rec.WalkAttributes(func(kv attribute.KeyValue) bool {
			switch string(kv.Key) {
			case AttrJobID:
				id = kv.Value.AsString()
			case AttrJobStatus:
				status = kv.Value.AsString()
			case AttrEngine:
				engine = kv.Value.AsString()
			case AttrDataType:
				dataType = kv.Value.AsString()
			}
			return true
		})
		at := rec.Timestamp()
		if at.IsZero() {
			at = rec.ObservedTimestamp()
		}
		j := get(id)
		j.engine, j.dataType = engine, dataType
		switch status {
		case StatusRunning:
			j.start = at
		case StatusCompleted:
			j.end, j.result = at, ResultSuccess
		case StatusFailed:
			j.end, j.result = at, ResultFailure
		}
	}
	jobs := tally{}
	var dangling int64
	for _, j := range runs {
		switch {
		case j.span:
			jobs.add(jobAttrs(j.result, j.engine, j.dataType), j.spanDur)
		case !j.end.IsZero() && !j.start.IsZero():
			jobs.add(jobAttrs(j.result, j.engine, j.dataType), j.end.Sub(j.start))
		case !j.end.IsZero():
			jobs.add(jobAttrs(j.result, j.engine, j.dataType), -1)
		case !j.start.IsZero():
			dangling++
		}
	}
	out := Totals{Jobs: jobs.sorted(), StageRuns: stages.sorted(), APIRequests: api.sorted(), JobsByResult: map[string]int64{}, DanglingStarts: dangling}
	for _, s := range out.Jobs {
		out.JobsByResult[s.Attributes[AttrResult]] += s.Count
	}
	return out
}
