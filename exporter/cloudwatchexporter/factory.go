// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/metadata"
	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/translate"
	"github.com/gpubuild/otelcol-gpubuild/internal/cumulative"
	"github.com/gpubuild/otelcol-gpubuild/internal/state"
)

// Defaults.
const (
	defaultTimeout = 15 * time.Second
	// defaultRequestTimeout: CloudWatch answers in well under a second; an
	// answer later than this is the residual window for a duplicate.
	defaultRequestTimeout = 30 * time.Second
	// defaultMaxSeriesPerMetric: a metric with more dimension sets than this
	// is almost surely carrying an identifier (a job id, a pid) as a dimension.
	defaultMaxSeriesPerMetric    = 5000
	defaultMaxConcurrentRequests = 4
	defaultCumulativeTTL         = 30 * time.Minute
	defaultCumulativeMaxSeries   = 50_000
	// defaultWriteFailureBufferBytes: four maximal OTLP requests; held as
	// pdata, about five times that in heap for the smallest points.
	defaultWriteFailureBufferBytes = 8 << 20
	// defaultWriteReserveBytes: room for many read-index and delete
	// transactions of the queue's bbolt file.
	defaultWriteReserveBytes = 4 << 20
	// defaultShutdownDrainTimeout stays under Kubernetes' default 30 s
	// grace period (an export in flight when it expires still finishes).
	defaultShutdownDrainTimeout = 20 * time.Second
)

// NewFactory returns the factory of the cloudwatch exporter.
func NewFactory() exporter.Factory {
	return exporter.NewFactory(
		metadata.Type,
		createDefaultConfig,
		exporter.WithMetrics(createMetrics, metadata.MetricsStability),
	)
}

func createDefaultConfig() component.Config {
	return &Config{
		TimeoutConfig:           exporterhelper.TimeoutConfig{Timeout: defaultTimeout},
		QueueConfig:             configoptional.Some(defaultQueueConfig()),
		BackOffConfig:           configretry.NewDefaultBackOffConfig(),
		ShutdownDrainTimeout:    defaultShutdownDrainTimeout,
		RequestTimeout:          defaultRequestTimeout,
		MaxSeriesPerMetric:      defaultMaxSeriesPerMetric,
		OutputDestination:       destinationCloudWatch,
		ResourceToDimensions:    translate.DefaultResourceToDimensions(),
		StorageResolution:       translate.DefaultStorageResolution,
		MaxConcurrentRequests:   defaultMaxConcurrentRequests,
		WriteFailureBufferBytes: defaultWriteFailureBufferBytes,
		WriteReserveBytes:       defaultWriteReserveBytes,
		Handoff:                 defaultHandoffConfig(),
		CumulativeState: CumulativeStateConfig{
			TTL:             defaultCumulativeTTL,
			MaxSeries:       defaultCumulativeMaxSeries,
			MaxAge:          cumulative.DefaultMaxAge,
			FutureTolerance: cumulative.DefaultFutureTolerance,
			Config:          state.DefaultConfig(),
		},
	}
}

func createMetrics(ctx context.Context, set exporter.Settings, c component.Config) (exporter.Metrics, error) {
	cfg := c.(*Config)
	m, err := newMetricsExporter(cfg, set)
	if err != nil {
		return nil, err
	}
	// exporterhelper's telemetry goes through the probe, which is how the
	// drain at Shutdown learns the queue's size (see upstream.go).
	helperSet := set
	helperSet.MeterProvider = m.queue.meterProvider(set.MeterProvider)
	helper, err := exporterhelper.NewMetrics(ctx, helperSet, cfg, m.pushMetrics,
		exporterhelper.WithStart(m.start),
		exporterhelper.WithShutdown(m.shutdown),
		exporterhelper.WithTimeout(cfg.TimeoutConfig),
		exporterhelper.WithRetry(cfg.BackOffConfig),
		exporterhelper.WithQueue(cfg.QueueConfig),
		// Cumulative points are rewritten into deltas in place.
		exporterhelper.WithCapabilities(consumer.Capabilities{MutatesData: true}),
	)
	if err != nil {
		return nil, err
	}
	if _, ok := m.queue.size(ctx); !ok && cfg.QueueConfig.HasValue() && cfg.ShutdownDrainTimeout > 0 {
		set.Logger.Warn("The sending queue's size cannot be read: shutdown_drain_timeout has no effect, Shutdown does not wait for the queue")
	}
	m.Metrics = helper
	if err := m.setUpWriteFailure(); err != nil {
		return nil, err
	}
	return m, nil
}

// defaultQueueConfig: one consumer, so one batch (up to the batch max_size)
// is translated at a time; the requests of that batch still go out
// max_concurrent_requests at a time. Ten consumers held ten batches'
// datums at once: 879 MiB peak RSS under 8 maximal OTLP requests.
func defaultQueueConfig() exporterhelper.QueueBatchConfig {
	q := exporterhelper.NewDefaultQueueConfig()
	q.NumConsumers = 1
	return q
}
