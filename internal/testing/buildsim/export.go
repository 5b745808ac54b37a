// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package buildsim

import (
	"context"
	"errors"
	"slices"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// flush exports the buffered log records, then the spans, in batches of at
// most MaxBatch; logs first because a real service writes a run's RUNNING
// record long before its span ends.
func (inc *incarnation) flush(ctx context.Context) error {
	var errs []error
	logs := inc.logs.take()
	for b := range slices.Chunk(logs, inc.r.cfg.MaxBatch) {
		errs = append(errs, inc.exportLogs(ctx, b))
	}
	spans := inc.spans.take()
	for b := range slices.Chunk(spans, inc.r.cfg.MaxBatch) {
		errs = append(errs, inc.exportSpans(ctx, b))
	}
	return errors.Join(errs...)
}

func (inc *incarnation) exportLogs(ctx context.Context, batch []sdklog.Record) error {
	err := inc.ex.Log.Export(ctx, batch)
	r := inc.r
	r.mu.Lock()
	defer r.mu.Unlock()
	r.exports.LogRecords.record(len(batch), err)
	if err != nil {
		r.opts.logf("buildsim: exporting %d log records: %v", len(batch), err)
		return err
	}
	for i := range batch {
		var id, status string
		batch[i].WalkAttributes(func(kv attribute.KeyValue) bool {
			switch string(kv.Key) {
			case AttrJobID:
				id = kv.Value.AsString()
			case AttrJobStatus:
				status = kv.Value.AsString()
			}
			return true
		})
		if id == "" {
			continue
		}
		j := r.acked.job(id)
		switch status {
		case StatusRunning:
			j.startLog = true
		case StatusCompleted, StatusFailed:
			j.endLog = true
		}
	}
	return nil
}

func (inc *incarnation) exportSpans(ctx context.Context, batch []sdktrace.ReadOnlySpan) error {
	err := inc.ex.Span.ExportSpans(ctx, batch)
	r := inc.r
	r.mu.Lock()
	defer r.mu.Unlock()
	r.exports.Spans.record(len(batch), err)
	if err != nil {
		r.opts.logf("buildsim: exporting %d spans: %v", len(batch), err)
		return err
	}
	for _, s := range batch {
		r.ackSpan(s)
	}
	return nil
}

// ackSpan adds an acknowledged span to the acknowledged truth, reading back
// what the span itself says (so Generated == Acknowledged also checks that
// the spans say what the plan meant).
func (r *runner) ackSpan(s sdktrace.ReadOnlySpan) {
	attrs := map[string]attribute.Value{}
	for _, kv := range s.Attributes() {
		attrs[string(kv.Key)] = kv.Value
	}
	d := s.EndTime().Sub(s.StartTime())
	result := ResultSuccess
	if s.Status().Code == codes.Error {
		result = ResultFailure
	}
	switch {
	case s.SpanKind() == trace.SpanKindServer:
		r.acked.api.add(apiAttrs(attrs[AttrRoute].AsString(), attrs[AttrMethod].AsString(), int(attrs[AttrStatusCode].AsInt64())), d)
	case attrs[AttrStage].Type() == attribute.STRING:
		if v, ok := attrs[AttrStageResult]; ok {
			result = v.AsString()
		}
		r.acked.stages.add(stageAttrs(attrs[AttrStage].AsString(), result, attrs[AttrEngine].AsString(), attrs[AttrDataType].AsString()), d)
	case attrs[AttrJobID].Type() == attribute.STRING:
		j := r.acked.job(attrs[AttrJobID].AsString())
		j.span = true
	}
}
