// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter"

import (
	"context"
	"fmt"
	"time"

	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/answered"
	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/send"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.uber.org/zap"
) // answeredPollInterval is how often, after a start, the sending queue's
// size is read until it is empty (forgetAnsweredOnceQueueEmpty).
const answeredPollInterval = time.Second

// answeredStorageName names the exporter's storage client of the record
// of answered requests, beside the persistent queue's.
const answeredStorageName = "answered"

// openAnsweredRequests opens the record in the persistent queue's storage
// extension: nil without a persistent queue (an in-memory queue loses its
// items at a kill, so nothing is sent again).
func (m *metricsExporter) openAnsweredRequests(ctx context.Context, host component.Host) (*send.AnsweredRequests, error) {
	q := m.cfg.QueueConfig.Get()
	if q == nil || q.StorageID == nil {
		return nil, nil
	}
	se, ok := host.GetExtensions()[*q.StorageID].(storage.Extension)
	if !ok {
		return nil, nil // exporterhelper's Start names the missing storage
	}
	client, err := se.GetClient(ctx, component.KindExporter, m.id, answeredStorageName)
	if err != nil {
		return nil, fmt.Errorf("sending_queue.storage: the record of answered requests: %w", err)
	}
	rec, n, err := answered.Open(ctx, client, answered.Size)
	if err != nil {
		_ = client.Close(ctx)
		return nil, fmt.Errorf("sending_queue.storage: reading the record of answered requests: %w", err)
	}
	m.logger.Debug("Read the record of answered PutMetricData requests", zap.Int("requests", n))
	return send.NewAnsweredRequests(rec, m.logger), nil
}

// forgetAnsweredOnceQueueEmpty ends the look-ups of the previous process's
// answers once the sending queue has been empty: what it dispatched again
// at the start has been sent, and a later request identical to one of
// those is new data.
func (m *metricsExporter) forgetAnsweredOnceQueueEmpty() {
	defer close(m.answeredDone)
	tick := time.NewTicker(answeredPollInterval)
	defer tick.Stop()
	for {
		select {
		case <-m.answeredStop:
			return
		case <-tick.C:
		}
		if n, ok := m.queue.size(context.Background()); ok && n == 0 {
			m.answered.Forget()
			return
		}
	}
}
