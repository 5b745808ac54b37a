// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package buildjobprocessor // import "github.com/gpubuild/otelcol-gpubuild/processor/buildjobprocessor"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"

	"github.com/gpubuild/otelcol-gpubuild/internal/buildjob/derive"
	"github.com/gpubuild/otelcol-gpubuild/processor/buildjobprocessor/internal/metadata"
)

// NewFactory returns the factory of the buildjob processor.
func NewFactory() processor.Factory {
	return processor.NewFactory(
		metadata.Type,
		createDefaultConfig,
		processor.WithMetrics(createMetricsProcessor, metadata.MetricsStability),
	)
}

// connectorType is the buildjob connector's type: beside one that also
// derives api.requests, Start stands the processor down.
var connectorType = metadata.Type

func createMetricsProcessor(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Metrics) (processor.Metrics, error) {
	pcfg := cfg.(*Config)
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	derivation, err := derive.NewHTTPDerivation(set.TelemetrySettings, set.ID, derive.HTTPSpec{
		Output:     pcfg.OutputConfig,
		Cumulative: pcfg.Cumulative,
		ScopeName:  metadata.ScopeName,
		Telemetry: derive.Telemetry{
			FlushesFailed:           tb.BuildjobProcessorFlushesFailed,
			PointsDropped:           tb.BuildjobProcessorPointsDropped,
			RecordsSkipped:          tb.RegisterBuildjobProcessorRecordsSkippedCallback,
			StateEntriesSkipped:     tb.RegisterBuildjobProcessorStateEntriesSkippedCallback,
			StateWriteFailures:      tb.RegisterBuildjobProcessorStateWriteFailuresCallback,
			CumulativePointsRefused: tb.RegisterBuildjobProcessorCumulativePointsRefusedCallback,
			Shutdown:                tb.Shutdown,
		},
	}, next)
	if err != nil {
		return nil, err
	}
	p := &buildjobProcessor{id: set.ID, cfg: pcfg, derivation: derivation}
	return processorhelper.NewMetrics(ctx, set, cfg, next, p.processMetrics,
		processorhelper.WithStart(p.Start),
		processorhelper.WithShutdown(p.Shutdown),
		processorhelper.WithCapabilities(consumer.Capabilities{MutatesData: false}),
	)
}
