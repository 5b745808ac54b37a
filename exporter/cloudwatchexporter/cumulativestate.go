// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/delta"
	"github.com/gpubuild/otelcol-gpubuild/internal/state"
)

// cumulativeStateStorageName names the exporter's client of the storage
// extension (the sending queue's is named after the signal, "metrics").
const cumulativeStateStorageName = "cumulative_state"

// openState restores the cumulative state a previous process saved in the
// storage extension state.storage, or says that it is kept in memory only.
func (m *metricsExporter) openState(ctx context.Context, host component.Host) error {
	cfg := m.cfg.CumulativeState
	if m.cfg.legacyStateKey {
		state.WarnRenamed(m.logger, legacyStateKey, "state")
	}
	if cfg.Storage == nil {
		state.WarnInMemory(m.logger, "cumulative state", "state",
			"after a restart the first point of every cumulative series is a baseline (not sent), so the counts since the last export are lost")
		return nil
	}
	id := *cfg.Storage
	st, err := state.Open(ctx, host, cfg.Config, state.Owner{
		Kind: component.KindExporter, ID: m.id, Client: cumulativeStateStorageName,
		Field: "state", What: "cumulative state", Logger: m.logger,
	})
	if err != nil {
		return err
	}
	client := st.Client
	load := m.deltas.AttachStorage(ctx, client, m.now())
	m.recordStorageErrors(ctx, storageRead, load.ReadErrors)
	if load.Expired > 0 {
		m.telemetry.ExporterCloudwatchCumulativeEvictions.Add(ctx, int64(load.Expired))
	}
	fields := []zap.Field{zap.Int("series", load.Restored), zap.Int("expired", load.Expired), zap.String("storage", id.String())}
	switch {
	case load.ReadErrors > 0:
		m.logger.Warn("Some cumulative state could not be read: the next point of those series is a baseline (not sent)",
			append(fields, zap.Int64("read_errors", load.ReadErrors))...)
	case load.Listed:
		m.logger.Info("Restored the cumulative state", fields...)
	}
	return nil
}

// storageOperation is the `operation` attribute of cumulative_storage_errors.
type storageOperation string

const (
	storageRead  storageOperation = "read"
	storageWrite storageOperation = "write"
)

func (m *metricsExporter) recordStorageErrors(ctx context.Context, op storageOperation, n int64) {
	if n > 0 {
		m.telemetry.ExporterCloudwatchCumulativeStorageErrors.Add(ctx, n,
			metric.WithAttributes(attribute.String("operation", string(op))))
	}
}

// saveState saves the cumulative state moved by records (see deltaConverter.save).
func (m *metricsExporter) saveState(ctx context.Context, records []delta.Record) {
	err := m.deltas.Save(ctx, records)
	if err == nil {
		m.saveFailing.Store(false)
		return
	}
	m.recordStorageErrors(ctx, storageWrite, 1)
	if !m.saveFailing.Swap(true) { // log when it starts failing, not every time
		m.logger.Warn("Could not save the cumulative state; a restart now may count some deltas twice", zap.Error(err))
	}
}
