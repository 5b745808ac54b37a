// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter"

import (
	"context"
	"fmt"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/gpubuild/otelcol-gpubuild/internal/statejournal"
)

// cumulativeStateStorageName names the exporter's client of the storage
// extension (the sending queue's is named after the signal, "metrics").
const cumulativeStateStorageName = "cumulative_state"

// attachStorage gets a client of the storage extension id and restores the
// cumulative state a previous process saved there.
func (e *cloudWatchExporter) attachStorage(ctx context.Context, host component.Host, id component.ID) error {
	ext, ok := host.GetExtensions()[id]
	if !ok {
		return fmt.Errorf("cumulative_state.storage: no extension %q is configured", id)
	}
	se, ok := ext.(storage.Extension)
	if !ok {
		return fmt.Errorf("cumulative_state.storage: extension %q is not a storage extension", id)
	}
	client, err := se.GetClient(ctx, component.KindExporter, e.id, cumulativeStateStorageName)
	if err != nil {
		return fmt.Errorf("cumulative_state.storage: %w", err)
	}
	if journal := e.cfg.CumulativeState.Journal; journal.Directory != "" {
		jc, _, err := statejournal.OpenFor(ctx, client, journal, component.KindExporter, e.id, cumulativeStateStorageName,
			"cumulative_state.journal", "cumulative state", e.logger)
		if err != nil {
			_ = client.Close(ctx)
			return err
		}
		client = jc
	}
	load := e.deltas.attachStorage(ctx, client, e.now())
	e.recordStorageErrors(ctx, storageRead, load.readErrors)
	if load.expired > 0 {
		e.telemetry.ExporterCloudwatchCumulativeEvictions.Add(ctx, int64(load.expired))
	}
	fields := []zap.Field{zap.Int("series", load.restored), zap.Int("expired", load.expired), zap.String("storage", id.String())}
	switch {
	case load.readErrors > 0:
		e.logger.Warn("Some cumulative state could not be read: the next point of those series is a baseline (not sent)",
			append(fields, zap.Int64("read_errors", load.readErrors))...)
	case load.listed:
		e.logger.Info("Restored the cumulative state", fields...)
	}
	return nil
}

// storageOperation is the `operation` attribute of cumulative_storage_errors.
type storageOperation string

const (
	storageRead  storageOperation = "read"
	storageWrite storageOperation = "write"
)

func (e *cloudWatchExporter) recordStorageErrors(ctx context.Context, op storageOperation, n int64) {
	if n > 0 {
		e.telemetry.ExporterCloudwatchCumulativeStorageErrors.Add(ctx, n,
			metric.WithAttributes(attribute.String("operation", string(op))))
	}
}

// saveState saves the cumulative state moved by records (see deltaConverter.save).
func (e *cloudWatchExporter) saveState(ctx context.Context, records []conversionRecord) {
	err := e.deltas.save(ctx, records)
	if err == nil {
		e.saveFailing.Store(false)
		return
	}
	e.recordStorageErrors(ctx, storageWrite, 1)
	if !e.saveFailing.Swap(true) { // log when it starts failing, not every time
		e.logger.Warn("Could not save the cumulative state; a restart now may count some deltas twice", zap.Error(err))
	}
}
