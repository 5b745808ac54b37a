// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/gpubuild/otelcol-gpubuild/internal/state"
)

// cumulativeStateStorageName names the exporter's client of the storage
// extension (the sending queue's is named after the signal, "metrics").
const cumulativeStateStorageName = "cumulative_state"

// openState restores the cumulative state a previous process saved in the
// storage extension state.storage, or says that it is kept in memory only.
func (e *cloudWatchExporter) openState(ctx context.Context, host component.Host) error {
	cfg := e.cfg.CumulativeState
	if e.cfg.legacyStateKey {
		state.WarnRenamed(e.logger, legacyStateKey, "state")
	}
	if cfg.Storage == nil {
		state.WarnInMemory(e.logger, "cumulative state", "state",
			"after a restart the first point of every cumulative series is a baseline (not sent), so the counts since the last export are lost")
		return nil
	}
	id := *cfg.Storage
	st, err := state.Open(ctx, host, cfg.Config, state.Owner{
		Kind: component.KindExporter, ID: e.id, Client: cumulativeStateStorageName,
		Field: "state", What: "cumulative state", Logger: e.logger,
	})
	if err != nil {
		return err
	}
	client := st.Client
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
