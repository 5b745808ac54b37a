// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package drain waits at shutdown for the sending queue to empty.
// exporterhelper's own Shutdown stops a persistent queue's consumers at
// once, leaving what is queued on disk for the next start
// (open-telemetry/opentelemetry-collector#5902); a sidecar whose pod is
// deleted loses its disk with it. The in-memory queue does drain, but with
// retries off: waiting first gives its requests their retries too.
package drain // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/drain"

import (
	"context"
	"time"

	"go.uber.org/zap"
)

// pollInterval is how often the queue's size is looked at.
const pollInterval = 50 * time.Millisecond

// Settings are what Wait needs of the exporter.
type Settings struct {
	// Timeout is shutdown_drain_timeout; 0 does not wait.
	Timeout time.Duration
	// Size is the sending queue's size; ok is false when it cannot be read.
	Size func(context.Context) (size int64, ok bool)
	// Unit is the queue's sizer, for the logs.
	Unit string
	// Persistent: the queue keeps what is left for the next start.
	Persistent bool
	Logger     *zap.Logger
}

// Wait returns when the sending queue is empty (every request exported or
// given up after its retries), when set.Timeout has passed or when ctx is
// done.
func Wait(ctx context.Context, set Settings) {
	if set.Timeout <= 0 {
		return
	}
	queued, ok := set.Size(ctx)
	if !ok || queued == 0 {
		return
	}
	set.Logger.Info("Sending what is queued before shutting down",
		zap.Int64("queued", queued), zap.String("unit", set.Unit),
		zap.Duration("shutdown_drain_timeout", set.Timeout))

	deadline := time.NewTimer(set.Timeout)
	defer deadline.Stop()
	poll := time.NewTicker(pollInterval)
	defer poll.Stop()
	for queued > 0 {
		select {
		case <-poll.C:
		case <-deadline.C:
			logLeftQueued(set, queued)
			return
		case <-ctx.Done():
			logLeftQueued(set, queued)
			return
		}
		if queued, ok = set.Size(ctx); !ok {
			return
		}
	}
}

func logLeftQueued(set Settings, queued int64) {
	fields := []zap.Field{zap.Int64("left", queued), zap.String("unit", set.Unit), zap.Duration("shutdown_drain_timeout", set.Timeout)}
	if set.Persistent {
		set.Logger.Warn("The sending queue did not empty before shutdown_drain_timeout; what is left stays in the persistent queue and is sent after the next start", fields...)
		return
	}
	set.Logger.Warn("The sending queue did not empty before shutdown_drain_timeout; what is left is tried once more, without retries, and lost if that fails", fields...)
}
