// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package intervalmergeprocessor // import "github.com/gpubuild/otelcol-gpubuild/processor/intervalmergeprocessor"

import (
	"context"

	"go.opentelemetry.io/otel/metric"
)

// registerStateGauges reports what the gateway holds for its senders: the
// journal's bytes, the age of the oldest interval the next consumer has
// not taken, and the senders whose identities are kept.
func (p *mergeProcessor) registerStateGauges() error {
	if err := p.tel.RegisterIntervalmergeJournalBytesCallback(func(_ context.Context, o metric.Int64Observer) error {
		p.mu.Lock()
		defer p.mu.Unlock()
		o.Observe(p.journalBytes())
		return nil
	}); err != nil {
		return err
	}
	if err := p.tel.RegisterIntervalmergeOldestPendingAgeCallback(func(_ context.Context, o metric.Float64Observer) error {
		p.mu.Lock()
		defer p.mu.Unlock()
		var age float64
		if len(p.pending) > 0 {
			age = p.now().Sub(p.pending[0].opened).Seconds()
		}
		o.Observe(age)
		return nil
	}); err != nil {
		return err
	}
	return p.tel.RegisterIntervalmergeIdentitiesKeptCallback(func(_ context.Context, o metric.Int64Observer) error {
		p.mu.Lock()
		defer p.mu.Unlock()
		o.Observe(int64(p.ids.Len()))
		return nil
	})
}

// journalBytes is what overLimit holds against journal.max_bytes; p.mu held.
func (p *mergeProcessor) journalBytes() int64 {
	if p.journal == nil {
		return 0
	}
	return p.pendingBytes + p.journal.Bytes()
}

// countRefusal counts a request refused by overLimit, by its reason; p.mu
// held.
func (p *mergeProcessor) countRefusal(ctx context.Context) {
	p.tel.IntervalmergeRequestsRefused.Add(ctx, 1)
	if p.journal != nil && p.journalBytes() >= p.cfg.State.Journal.MaxBytes {
		p.tel.IntervalmergeRequestsRefusedJournalFull.Add(ctx, 1)
	}
}
