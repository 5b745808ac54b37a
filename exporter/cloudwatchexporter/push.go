// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter"

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/send"
	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/translate"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

const (
	// throttleRetryDelay is the least time before a throttled request is retried.
	throttleRetryDelay = time.Second
)

// translationBuffers is the per-export scratch space, reused through a pool.
type translationBuffers struct {
	translate.Translation
	reqs []translate.PackedRequest
}

// pushMetrics sends md, which holds only deltas and gauges (see
// deltaConverter). When some requests fail, it hands back to exporterhelper
// only the data points of those requests: retryable failures as a
// consumererror.Metrics (throttling with a delay), invalid requests as
// permanent, so a retry never re-sends what CloudWatch accepted. During a
// hand-off at Shutdown, md goes to the peer instead (handoff.go).
func (m *metricsExporter) pushMetrics(ctx context.Context, md pmetric.Metrics) error {
	if m.handoff != nil && m.handoff.on.Load() {
		return m.handoff.push(ctx, md)
	}
	if m.putter == nil {
		return errors.New("cloudwatch exporter not started")
	}
	buf := m.translations.Get().(*translationBuffers)
	defer func() {
		buf.reqs = buf.reqs[:0]
		buf.Reset()
		m.translations.Put(buf)
	}()

	now := m.now()
	m.translator.Translate(md, now, &buf.Translation)
	if m.series != nil {
		m.series.Apply(&buf.Translation, now)
	}
	m.recordDropped(ctx, &buf.Dropped)
	m.recordAltered(ctx, &buf.Altered)
	if len(buf.Datums) == 0 {
		return nil
	}
	buf.reqs = translate.Pack(buf.Datums, m.cfg.Namespace, buf.reqs)
	results := m.sendAll(ctx, buf.Datums, buf.reqs)
	return m.settle(ctx, md, buf, results)
}

// sentRange is what happened to datums[first:first+n] of the packed datums:
// a whole request or, after a 413, one part of it.
type sentRange struct {
	first, n int
	err      error
}

// sendAll sends the requests, at most max_concurrent_requests at a time
// (across all exports), at the adaptive pace.
func (m *metricsExporter) sendAll(ctx context.Context, packed []translate.Datum, reqs []translate.PackedRequest) []sentRange {
	results := make([][]sentRange, len(reqs))
	var wg sync.WaitGroup
	for i := range reqs {
		if err := m.acquire(ctx); err != nil {
			for j := i; j < len(reqs); j++ {
				results[j] = []sentRange{{first: reqs[j].First, n: reqs[j].N, err: fmt.Errorf("%w: %w", send.ErrNotSent, err)}}
			}
			break
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer func() { <-m.slots }()
			r := reqs[i]
			results[i] = m.putSplitting(ctx, packed, r.First, r.N, results[i])
		}(i)
	}
	wg.Wait()
	var out []sentRange
	for _, r := range results {
		out = append(out, r...)
	}
	return out
}

// putSplitting sends packed[first:first+n]. When CloudWatch refuses it as
// too large (413, e.g. a limit lower than the one pack assumes), it is split
// in two at a data point boundary and each half sent the same way, down to
// one datum; a single datum refused for its size is rejected (dropped, counted).
func (m *metricsExporter) putSplitting(ctx context.Context, packed []translate.Datum, first, n int, out []sentRange) []sentRange {
	err := m.putter.Put(ctx, m.cfg.Namespace, packed[first:first+n])
	switch {
	case err == nil || ctx.Err() != nil:
	case send.IsTooLarge(err) && n > 1:
		m.telemetry.ExporterCloudwatchRequests.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", "too_large_split")))
		half := splitPoint(packed[first : first+n])
		out = m.putSplitting(ctx, packed, first, half, out)
		return m.putSplitting(ctx, packed, first+half, n-half, out)
	case send.RefusedAsInvalid(err):
		return m.isolateRejected(ctx, packed, first, n, err, out)
	}
	return append(out, sentRange{first: first, n: n, err: err})
}

// isolateRejected handles packed[first:first+n], refused as invalid (err):
// one data point CloudWatch does not take (a value the translation did not
// foresee) must not cost the others of its request. The request is sent
// again in two halves at a data point boundary; a half refused while the
// other passes is halved the same way, down to one data point, which is
// rejected alone. When both halves are refused the fault is in the whole
// request (or in both): both are rejected, so a request refused for what
// it shares costs two more requests, never one per point.
func (m *metricsExporter) isolateRejected(ctx context.Context, packed []translate.Datum, first, n int, err error, out []sentRange) []sentRange {
	ds := packed[first : first+n]
	if ds[0].Point == ds[n-1].Point || ctx.Err() != nil {
		return append(out, sentRange{first: first, n: n, err: err})
	}
	m.telemetry.ExporterCloudwatchRequests.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", "rejected_split")))
	half := splitPoint(ds)
	left, right := sentRange{first: first, n: half}, sentRange{first: first + half, n: n - half}
	left.err = m.putter.Put(ctx, m.cfg.Namespace, packed[left.first:left.first+left.n])
	right.err = m.putter.Put(ctx, m.cfg.Namespace, packed[right.first:right.first+right.n])
	switch {
	case right.err == nil && send.RefusedAsInvalid(left.err):
		return append(m.isolateRejected(ctx, packed, left.first, left.n, left.err, out), right)
	case left.err == nil && send.RefusedAsInvalid(right.err):
		return m.isolateRejected(ctx, packed, right.first, right.n, right.err, append(out, left))
	}
	return append(out, left, right)
}

// splitPoint is where to cut ds (len >= 2) in two: the data point boundary
// nearest the middle, or the middle when ds is one data point.
func splitPoint(ds []translate.Datum) int {
	mid := len(ds) / 2
	for d := 0; d < len(ds); d++ {
		if i := mid - d; i > 0 && ds[i].Point != ds[i-1].Point {
			return i
		}
		if i := mid + d; i < len(ds) && i > 0 && ds[i].Point != ds[i-1].Point {
			return i
		}
	}
	return mid
}

func (m *metricsExporter) acquire(ctx context.Context) error {
	select {
	case m.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	if !m.dryRun.Load() {
		if err := m.pace.Wait(ctx); err != nil {
			<-m.slots
			return err
		}
	}
	return nil
}
