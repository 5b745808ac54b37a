// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter"

import (
	"context"
	"time"

	"go.uber.org/zap"
)

// drainPollInterval is how often Shutdown looks at the queue's size.
const drainPollInterval = 50 * time.Millisecond

// drainQueue returns when the sending queue is empty (every request
// exported or given up after its retries), when shutdown_drain_timeout has
// passed or when ctx is done.
func (m *metricsExporter) drainQueue(ctx context.Context) {
	timeout := m.cfg.ShutdownDrainTimeout
	if timeout <= 0 {
		return
	}
	queued, ok := m.queue.size(ctx)
	if !ok || queued == 0 {
		return
	}
	m.logger.Info("Sending what is queued before shutting down",
		zap.Int64("queued", queued), zap.String("unit", m.cfg.QueueConfig.Get().Sizer.String()),
		zap.Duration("shutdown_drain_timeout", timeout))

	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	poll := time.NewTicker(drainPollInterval)
	defer poll.Stop()
	for queued > 0 {
		select {
		case <-poll.C:
		case <-deadline.C:
			m.logLeftQueued(queued, timeout)
			return
		case <-ctx.Done():
			m.logLeftQueued(queued, timeout)
			return
		}
		if queued, ok = m.queue.size(ctx); !ok {
			return
		}
	}
}

func (m *metricsExporter) logLeftQueued(queued int64, timeout time.Duration) {
	queueCfg := m.cfg.QueueConfig.Get()
	fields := []zap.Field{zap.Int64("left", queued), zap.String("unit", queueCfg.Sizer.String()), zap.Duration("shutdown_drain_timeout", timeout)}
	if queueCfg.StorageID != nil {
		m.logger.Warn("The sending queue did not empty before shutdown_drain_timeout; what is left stays in the persistent queue and is sent after the next start", fields...)
		return
	}
	m.logger.Warn("The sending queue did not empty before shutdown_drain_timeout; what is left is tried once more, without retries, and lost if that fails", fields...)
}
