// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derive

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/gpubuild/otelcol-gpubuild/internal/buildjob/gpujoin"
	"github.com/gpubuild/otelcol-gpubuild/internal/buildjob/runmemory"
)

// consumeTraces derives job runs, stage runs and API requests from spans.
func (d *deriver) consumeTraces(td ptrace.Traces, now time.Time) {
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		res := d.resources.intern(rs.Resource())
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				d.span(res, spans.At(k), now)
			}
		}
	}
}

// span classifies one span: HTTP server request, stage, or job. An HTTP
// server span is only ever an API request, even when the service tags it with
// build.job.id (as a /_status/{job_id} handler may): a status poll is not a run.
func (d *deriver) span(res *resourceEntry, span ptrace.Span, now time.Time) {
	attrs := span.Attributes()
	if span.Kind() == ptrace.SpanKindServer {
		if method, ok := firstPresent(attrs, attrHTTPRequestMethod, attrHTTPMethodOld); ok {
			if d.apiFromSpans {
				d.apiSpan(res, span, attrs, method)
			}
			return
		}
	}
	if v, ok := attrs.Get(attrBuildStage); ok {
		if v.Type() != pcommon.ValueTypeStr {
			d.stats.skipped[skipWrongType]++
			return
		}
		d.stageSpan(res, span, attrs, v.Str())
		return
	}
	if len(d.stageSpanNames) > 0 {
		if stage, ok := d.stageSpanNames[span.Name()]; ok {
			d.stageSpan(res, span, attrs, stage)
			return
		}
	}
	if v, ok := attrs.Get(attrBuildJobID); ok {
		d.jobSpan(res, span, attrs, v, now)
		return
	}
	if len(d.jobSpanNames) > 0 && d.jobSpanNames[span.Name()] {
		d.unnamedJobSpan(res, span, attrs)
	}
}

// spanSeconds returns the span's duration, or why it has none.
func spanSeconds(span ptrace.Span) (float64, skipReason, bool) {
	start, end := span.StartTimestamp(), span.EndTimestamp()
	if start == 0 || end == 0 {
		return 0, skipMissingTimestamp, false
	}
	if end < start {
		return 0, skipNegativeDuration, false
	}
	return float64(end-start) / float64(time.Second), 0, true
}

// spanResult reads the result attribute, falling back to the span status.
func spanResult(span ptrace.Span, attrs pcommon.Map, key string) (string, skipReason, bool) {
	if v, ok := attrs.Get(key); ok {
		if v.Type() != pcommon.ValueTypeStr {
			return "", skipWrongType, false
		}
		r, ok := parseResult(v.Str())
		if !ok {
			return "", skipInvalidValue, false
		}
		return r, 0, true
	}
	if span.Status().Code() == ptrace.StatusCodeError {
		return resultFailure, 0, true
	}
	return resultSuccess, 0, true
}

// resultAndSeconds reads a job or stage span's result (resultKey, else
// its status) and duration; a span without either is counted as skipped.
func (d *deriver) resultAndSeconds(span ptrace.Span, attrs pcommon.Map, resultKey string) (string, float64, bool) {
	result, reason, ok := spanResult(span, attrs, resultKey)
	if !ok {
		d.stats.skipped[reason]++
		return "", 0, false
	}
	seconds, reason, ok := spanSeconds(span)
	if !ok {
		d.stats.skipped[reason]++
		return "", 0, false
	}
	return result, seconds, true
}

// firstSeen tells whether span is new; one seen before (an SDK's retry) is
// counted as deduplicated.
func (d *deriver) firstSeen(span ptrace.Span) bool {
	if !d.recentSpans.add(newSpanIdentity(span.TraceID(), span.SpanID())) {
		d.stats.deduplicated++
		return false
	}
	return true
}

func (d *deriver) stageSpan(res *resourceEntry, span ptrace.Span, attrs pcommon.Map, stage string) {
	if stage == "" {
		d.stats.skipped[skipInvalidValue]++
		return
	}
	result, seconds, ok := d.resultAndSeconds(span, attrs, attrBuildStageResult)
	if !ok || !d.firstSeen(span) {
		return
	}
	dims := d.resolveDims(attrs, res)
	d.observe(familyStages, res, stage, result, "", dims, seconds)
	if d.gpu != nil {
		d.countStageGPU(res, span.StartTimestamp(), span.EndTimestamp(), gpujoin.HintFrom(attrs), stage, result, dims)
	}
}

func (d *deriver) jobSpan(res *resourceEntry, span ptrace.Span, attrs pcommon.Map, id pcommon.Value, now time.Time) {
	if id.Type() != pcommon.ValueTypeStr {
		d.stats.skipped[skipWrongType]++
		return
	}
	if id.Str() == "" {
		d.stats.skipped[skipInvalidValue]++
		return
	}
	result, _, ok := d.resultAndSeconds(span, attrs, attrBuildJobResult)
	if !ok {
		return
	}
	key := runmemory.Key{Service: res.serviceName, JobID: id.Str()}
	d.jobs.Span(key, runPayload{res: res, dims: d.resolveDims(attrs, res), gpu: gpujoin.HintFrom(attrs)}, span.StartTimestamp(), span.EndTimestamp(), result, now)
}

// unnamedJobSpan counts a span matched by job_span_names that has no job
// id: it is a run of its own, deduplicated by span identity only.
func (d *deriver) unnamedJobSpan(res *resourceEntry, span ptrace.Span, attrs pcommon.Map) {
	result, seconds, ok := d.resultAndSeconds(span, attrs, attrBuildJobResult)
	if !ok || !d.firstSeen(span) {
		return
	}
	d.countJob(countedRun{res: res, dims: d.resolveDims(attrs, res), result: result, seconds: seconds, hasDuration: result != resultTimeout})
}

// apiSpan counts an HTTP server span: a SERVER span with a request method
// (other SERVER spans, gRPC or messaging, are not API requests here).
func (d *deriver) apiSpan(res *resourceEntry, span ptrace.Span, attrs pcommon.Map, methodV pcommon.Value) {
	if methodV.Type() != pcommon.ValueTypeStr {
		d.stats.skipped[skipWrongType]++
		return
	}
	class, ok := d.responseClass(attrs)
	if !ok {
		return
	}
	route, ok := d.httpRoute(attrs)
	if !ok {
		return
	}
	seconds, reason, ok := spanSeconds(span)
	if !ok {
		d.stats.skipped[reason]++
		return
	}
	d.observe(familyAPI, res, route, normalizeMethod(methodV.Str()), class, d.resolveDims(attrs, res), seconds)
}
