// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter"

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.uber.org/zap"

	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/answered"
)

// answeredPollInterval is how often, after a start, the sending queue's
// size is read until it is empty (forgetAnsweredOnceQueueEmpty).
const answeredPollInterval = time.Second

// answeredStorageName names the exporter's storage client of the record
// of answered requests, beside the persistent queue's.
const answeredStorageName = "answered"

// answeredRequests is the record of answered requests of a persistent
// queue (internal/answered); a nil *answeredRequests records nothing.
type answeredRequests struct {
	record  *answered.Record
	logger  *zap.Logger
	failing atomic.Bool // the last write failed (logged once per episode)
}

// openAnsweredRequests opens the record in the persistent queue's storage
// extension: nil without a persistent queue (an in-memory queue loses its
// items at a kill, so nothing is sent again).
func (m *metricsExporter) openAnsweredRequests(ctx context.Context, host component.Host) (*answeredRequests, error) {
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
	return &answeredRequests{record: rec, logger: m.logger}, nil
}

// seen reports whether a request was answered by a previous process
// (killed before its queue recorded the item as sent): it is then not sent
// again.
func (a *answeredRequests) seen(hash uint64, datums int) bool {
	if a == nil || !a.record.Answered(hash) {
		return false
	}
	a.logger.Info("A PutMetricData request answered before the restart is not sent again", zap.Int("datums", datums))
	return true
}

// add records an answered request. A failed write only leaves the window
// open for this request; it is logged once until a write succeeds.
func (a *answeredRequests) add(ctx context.Context, hash uint64) {
	if a == nil {
		return
	}
	if err := a.record.Add(ctx, hash); err != nil {
		if !a.failing.Swap(true) {
			a.logger.Warn("Could not record an answered PutMetricData request: a kill -9 before its queue records it sends it again", zap.Error(err))
		}
		return
	}
	a.failing.Store(false)
}

// answerRecorder is the CloudWatch client's HTTP client: it records a
// request carrying a prepared body as answered as soon as CloudWatch's 2xx
// status arrives, before the SDK reads and decodes the answer (measured:
// most of the time from the answer to PutMetricData's return).
type answerRecorder struct{ next cloudwatch.HTTPClient }

func (r answerRecorder) Do(req *http.Request) (*http.Response, error) {
	resp, err := r.next.Do(req)
	if err == nil && resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if b, ok := req.Context().Value(preparedBodyKey{}).(*preparedBody); ok {
			b.answered.add(req.Context(), b.hash)
		}
	}
	return resp, err
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
			m.answered.record.Forget()
			return
		}
	}
}

func (a *answeredRequests) close(ctx context.Context) error {
	if a == nil {
		return nil
	}
	return a.record.Close(ctx)
}
