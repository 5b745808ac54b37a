// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package buildsim

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	otellog "go.opentelemetry.io/otel/log"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// pendingJob is a run whose RUNNING record went out and whose end has not.
type pendingJob struct {
	plan       JobPlan
	start, end time.Time
	ctx        context.Context
	span       trace.Span
}

// startJob emits the start of one run: its job span is opened and its
// RUNNING record emitted, with simulated timestamps such that the run ends
// StartLead from now. With no lead the run is finished at once.
func (inc *incarnation) startJob(ctx context.Context, j JobPlan) {
	r := inc.r
	cfg := r.cfg
	end := r.opts.now().Add(cfg.StartLead)
	p := pendingJob{plan: j, start: end.Add(-j.Duration), end: end, ctx: ctx}

	r.mu.Lock()
	r.generated.addPlanned(j, cfg)
	if cfg.JobSpans || cfg.JobLogs {
		s := r.acked.job(j.ID)
		s.engine, s.dataType, s.result, s.duration = j.Engine, j.DataType, j.Result, j.Duration
	}
	r.mu.Unlock()

	if cfg.JobSpans {
		attrs := append([]attribute.KeyValue{attribute.String(AttrJobID, j.ID), attribute.String(AttrTenant, j.Tenant)}, jobDims(j)...)
		attrs = append(attrs, inc.r.gpuAttr(j)...)
		if j.ResultAttr {
			attrs = append(attrs, attribute.String(AttrJobResult, j.Result))
		}
		p.ctx, p.span = inc.tracer.Start(ctx, "index_build", trace.WithTimestamp(p.start), trace.WithAttributes(attrs...))
	}
	if cfg.JobLogs {
		inc.emitStatus(p.ctx, j, StatusRunning, p.start, otellog.SeverityInfo)
	}
	if cfg.StartLead <= 0 {
		inc.finishJob(p)
		return
	}
	inc.pending = append(inc.pending, p)
}

// finishDue finishes the pending runs whose end has come.
func (inc *incarnation) finishDue(now time.Time) {
	n := 0
	for _, p := range inc.pending {
		if p.end.After(now) {
			inc.pending[n] = p
			n++
			continue
		}
		inc.finishJob(p)
	}
	inc.pending = inc.pending[:n]
}

// finishAll finishes every pending run now (their timestamps stay as
// planned).
func (inc *incarnation) finishAll(context.Context) {
	for _, p := range inc.pending {
		inc.finishJob(p)
	}
	inc.pending = nil
}

// gpuAttr is the hw.id a run names (Config.GPUIDs), or nothing.
func (r *runner) gpuAttr(j JobPlan) []attribute.KeyValue {
	if len(r.cfg.GPUIDs) == 0 {
		return nil
	}
	return []attribute.KeyValue{attribute.String(AttrGPUID, r.cfg.GPUIDs[j.Index%len(r.cfg.GPUIDs)])}
}

func jobDims(j JobPlan) []attribute.KeyValue {
	return []attribute.KeyValue{attribute.String(AttrEngine, j.Engine), attribute.String(AttrDataType, j.DataType)}
}

// finishJob emits the rest of a run: its stage spans, its end record, the
// end of its job span, the API spans and the SDK measurements.
func (inc *incarnation) finishJob(p pendingJob) {
	r := inc.r
	cfg := r.cfg
	j, start, end, ctx := p.plan, p.start, p.end, p.ctx
	dims := jobDims(j)
	if cfg.StageSpans {
		for _, st := range j.Stages {
			attrs := append([]attribute.KeyValue{attribute.String(AttrStage, st.Stage), attribute.String(AttrJobID, j.ID)}, dims...)
			attrs = append(attrs, r.gpuAttr(j)...)
			if st.ResultAttr {
				attrs = append(attrs, attribute.String(AttrStageResult, st.Result))
			}
			sStart := start.Add(st.Offset)
			_, sp := inc.tracer.Start(ctx, st.Stage, trace.WithTimestamp(sStart), trace.WithAttributes(attrs...))
			if st.Result == ResultFailure {
				sp.SetStatus(codes.Error, st.Stage+" failed")
			}
			sp.End(trace.WithTimestamp(sStart.Add(st.Duration)))
		}
	}
	if cfg.JobLogs {
		switch endStatus(j.Result) {
		case StatusCompleted:
			inc.emitStatus(ctx, j, StatusCompleted, end, otellog.SeverityInfo)
		case StatusFailed:
			inc.emitStatus(ctx, j, StatusFailed, end, otellog.SeverityError)
		}
	}
	if p.span != nil {
		if j.Result == ResultFailure {
			p.span.SetStatus(codes.Error, "index build failed")
		}
		p.span.End(trace.WithTimestamp(end))
	}
	// API calls are separate requests: their spans are roots.
	apiCtx := context.WithoutCancel(trace.ContextWithSpanContext(ctx, trace.SpanContext{}))
	if cfg.APISpans {
		for _, c := range j.API {
			cStart := start.Add(c.Offset)
			_, sp := inc.tracer.Start(apiCtx, c.Method+" "+c.Route, trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(cStart),
				trace.WithAttributes(
					attribute.String(AttrRoute, c.Route), attribute.String(AttrMethod, c.Method),
					attribute.Int(AttrStatusCode, c.Status), attribute.String(AttrURLPath, c.Path),
					attribute.String("url.scheme", "http"), attribute.String("server.address", "localhost"),
				))
			if c.Status >= 500 {
				sp.SetStatus(codes.Error, "")
			}
			sp.End(trace.WithTimestamp(cStart.Add(c.Duration)))
		}
	}
	if cfg.Metrics && cfg.APIMetrics {
		for _, c := range j.API {
			d := c.Duration.Seconds()
			inc.httpDur.Record(apiCtx, d, metric.WithAttributes(
				attribute.String(AttrRoute, c.Route), attribute.String(AttrMethod, c.Method),
				attribute.Int(AttrStatusCode, c.Status), attribute.String("url.scheme", "http")))
			r.mu.Lock()
			addHist(&r.sdk.HTTPServerDuration, d)
			r.mu.Unlock()
		}
	}
	if cfg.Metrics && j.Result == ResultSuccess {
		inc.counter.Add(apiCtx, j.Vectors, metric.WithAttributes(attribute.String(AttrEngine, j.Engine), attribute.String(AttrTenant, j.Tenant)))
		inc.hist.Record(apiCtx, float64(j.IndexBytes), metric.WithAttributes(dims...))
		r.mu.Lock()
		r.sdk.Counter.Total += j.Vectors
		r.counterSeries[j.Engine+"|"+j.Tenant] = struct{}{}
		r.recordHist(float64(j.IndexBytes), j.Engine+"|"+j.DataType)
		r.mu.Unlock()
	}
}

func (inc *incarnation) emitStatus(ctx context.Context, j JobPlan, status string, at time.Time, sev otellog.Severity) {
	var rec otellog.Record
	if j.ObservedTimeOnly {
		rec.SetObservedTimestamp(at)
	} else {
		rec.SetTimestamp(at)
		rec.SetObservedTimestamp(inc.r.opts.now())
	}
	rec.SetSeverity(sev)
	rec.SetBody(attribute.StringValue(fmt.Sprintf("job %s is %s", j.ID, status)))
	rec.AddAttributes(attribute.String(AttrJobID, j.ID), attribute.String(AttrJobStatus, status),
		attribute.String(AttrEngine, j.Engine), attribute.String(AttrDataType, j.DataType))
	if len(inc.r.cfg.GPUIDs) > 0 {
		rec.AddAttributes(attribute.String(AttrGPUID, inc.r.cfg.GPUIDs[j.Index%len(inc.r.cfg.GPUIDs)]))
	}
	inc.logger.Emit(ctx, rec)
}
