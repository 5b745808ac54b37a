// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter"

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/send"
	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/translate"
	"github.com/gpubuild/otelcol-gpubuild/internal/pmetricutil"
)

// settle counts what happened to each request and decides what to retry.
func (m *metricsExporter) settle(ctx context.Context, md pmetric.Metrics, buf *translationBuffers, results []sentRange) error {
	var (
		sent, rejectedPoints int
		retry                []translate.PointRef
		throttled            bool
		errs                 []error
		outcomes             [send.NumOutcomes]int64
		authCode             string
	)
	for _, r := range results {
		err := r.err
		out := send.Classify(err)
		if send.IsTooLarge(err) {
			out = send.OutcomeRejected // one datum too large for CloudWatch alone
		}
		if !errors.Is(err, send.ErrNotSent) {
			outcomes[out]++
		}
		ds := buf.Datums[r.first : r.first+r.n]
		switch out {
		case send.OutcomeSuccess:
			sent += r.n
			continue
		case send.OutcomeRejected:
			n := forEachPoint(ds, func(int32) {})
			rejectedPoints += n
			m.logger.Warn("CloudWatch rejected a PutMetricData request; its data points are dropped",
				zap.Int("datums", r.n), zap.Int("data_points", n), zap.Error(err))
		default:
			if out == send.OutcomeAuthError && authCode == "" {
				authCode = cmp.Or(send.ErrorCode(err), "HTTP auth status")
			}
			throttled = throttled || out == send.OutcomeThrottled
			forEachPoint(ds, func(p int32) { retry = append(retry, buf.Points[p]) })
		}
		errs = append(errs, err)
	}

	if m.dryRun.Load() {
		m.reportAutoDryRun()
	} else {
		m.sending.update(m.host, &outcomes)
		for o, n := range outcomes {
			if n > 0 {
				m.telemetry.ExporterCloudwatchRequests.Add(ctx, n,
					metric.WithAttributes(attribute.String("outcome", send.RequestOutcome(o).String())))
			}
		}
		// Printed datums are not sent.
		m.telemetry.ExporterCloudwatchDatumsSent.Add(ctx, int64(sent))
	}
	if rejectedPoints > 0 {
		var d translate.DropCounts
		d[translate.ReasonRejected] = rejectedPoints
		m.recordDropped(ctx, &d)
	}
	if len(errs) == 0 {
		return nil
	}
	if authCode != "" {
		m.logger.Warn("CloudWatch refused the credentials; they are retrieved again and the data retried until retry_on_failure.max_elapsed_time",
			zap.String("aws_error_code", authCode))
	}
	err := fmt.Errorf("%d of %d PutMetricData requests failed: %w", len(errs), len(results), errors.Join(errs...))
	if len(retry) == 0 {
		return consumererror.NewPermanent(err)
	}
	failed := subset(md, retry)
	m.telemetry.ExporterCloudwatchPointsRetried.Add(ctx, int64(failed.DataPointCount()))
	err = consumererror.NewMetrics(err, failed)
	if throttled {
		m.pace.Throttled()
		err = exporterhelper.NewThrottleRetry(err, m.throttleDelay)
	}
	return err
}

// forEachPoint calls fn once per data point of ds (a point's datums are
// adjacent) and returns how many points there were.
func forEachPoint(ds []translate.Datum, fn func(point int32)) int {
	n := 0
	for i := range ds {
		if i == 0 || ds[i].Point != ds[i-1].Point {
			fn(ds[i].Point)
			n++
		}
	}
	return n
}

func (m *metricsExporter) recordAltered(ctx context.Context, a *translate.AlterCounts) {
	for r, n := range a {
		if n > 0 {
			m.telemetry.ExporterCloudwatchPointsAltered.Add(ctx, int64(n),
				metric.WithAttributes(attribute.String("reason", translate.AlterReason(r).String())))
		}
	}
}

func (m *metricsExporter) recordDropped(ctx context.Context, d *translate.DropCounts) {
	for r, n := range d {
		if n > 0 {
			m.telemetry.ExporterCloudwatchPointsDropped.Add(ctx, int64(n),
				metric.WithAttributes(attribute.String("reason", translate.DropReason(r).String())))
		}
	}
}

// subset copies out of md the data points refs point to, keeping their
// resource, scope and metric; it is what a retry re-sends.
func subset(md pmetric.Metrics, refs []translate.PointRef) pmetric.Metrics {
	slices.SortFunc(refs, func(a, b translate.PointRef) int {
		return cmp.Or(cmp.Compare(a.Resource, b.Resource), cmp.Compare(a.Scope, b.Scope),
			cmp.Compare(a.Metric, b.Metric), cmp.Compare(a.Point, b.Point))
	})
	refs = slices.Compact(refs)

	out := pmetric.NewMetrics()
	var (
		rm  pmetric.ResourceMetrics
		sm  pmetric.ScopeMetrics
		m   pmetric.Metric
		cur = translate.PointRef{Resource: -1, Scope: -1, Metric: -1, Point: -1}
	)
	for _, r := range refs {
		srcRM := md.ResourceMetrics().At(int(r.Resource))
		srcSM := srcRM.ScopeMetrics().At(int(r.Scope))
		srcM := srcSM.Metrics().At(int(r.Metric))
		if r.Resource != cur.Resource {
			rm = out.ResourceMetrics().AppendEmpty()
			srcRM.Resource().CopyTo(rm.Resource())
			rm.SetSchemaUrl(srcRM.SchemaUrl())
			cur = translate.PointRef{Resource: r.Resource, Scope: -1, Metric: -1, Point: -1}
		}
		if r.Scope != cur.Scope {
			sm = rm.ScopeMetrics().AppendEmpty()
			srcSM.Scope().CopyTo(sm.Scope())
			sm.SetSchemaUrl(srcSM.SchemaUrl())
			cur.Scope, cur.Metric = r.Scope, -1
		}
		if r.Metric != cur.Metric {
			m = sm.Metrics().AppendEmpty()
			pmetricutil.CopyMetricWithoutPoints(srcM, m)
			cur.Metric = r.Metric
		}
		pmetricutil.AppendPoint(srcM, m, int(r.Point))
	}
	return out
}
