// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package pipelinehealthreceiver // import "github.com/gpubuild/otelcol-gpubuild/receiver/pipelinehealthreceiver"

import (
	"context"
	"sync/atomic"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"
	"go.uber.org/zap"
)

// healthReceiver is the scraper controller's periodic reads plus one last
// read at shutdown. Without it, what the pipeline lost since the previous
// read (at the shipped interval, up to a minute) would never be sent: the
// counters are read, not pushed. Receivers stop before the processors and
// exporters, and the pull endpoint after them, so the last read still
// reaches the data's own pipeline and the exporter's queue.
type healthReceiver struct {
	receiver.Metrics // the scraper controller
	scraper          *endpointScraper
	next             consumer.Metrics
	logger           *zap.Logger
	started          atomic.Bool
}

func (r *healthReceiver) Start(ctx context.Context, host component.Host) error {
	if err := r.Metrics.Start(ctx, host); err != nil {
		return err
	}
	r.started.Store(true)
	return nil
}

// Shutdown stops the periodic reads, then reads once more and hands on
// what the counters moved since the previous read. A failed last read is
// logged, not returned: the collector's exit status is about the data.
func (r *healthReceiver) Shutdown(ctx context.Context) error {
	err := r.Metrics.Shutdown(ctx) // waits for a read under way: the last one below is the only one
	if !r.started.Load() {
		return err
	}
	readCtx := ctx
	if r.scraper.cfg.Timeout > 0 {
		var cancel context.CancelFunc
		readCtx, cancel = context.WithTimeout(ctx, r.scraper.cfg.Timeout)
		defer cancel()
	}
	md, readErr := r.scraper.scrape(readCtx)
	if readErr != nil {
		r.logger.Warn("The last read of the pipeline's health at shutdown failed: what it lost since the previous read is not sent", zap.Error(readErr))
		return err
	}
	points := md.DataPointCount() // once offered, md is the pipeline's to change
	if points == 0 {
		return err
	}
	if consumeErr := r.next.ConsumeMetrics(ctx, md); consumeErr != nil {
		r.logger.Warn("The last read of the pipeline's health at shutdown was not taken", zap.Error(consumeErr), zap.Int("points", points))
	}
	return err
}
