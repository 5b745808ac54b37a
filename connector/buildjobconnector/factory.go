// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package buildjobconnector // import "github.com/gpubuild/otelcol-gpubuild/connector/buildjobconnector"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"

	"github.com/gpubuild/otelcol-gpubuild/connector/buildjobconnector/internal/metadata"
	"github.com/gpubuild/otelcol-gpubuild/internal/buildjob/derive"
)

// factory is the connector factory; it also tells the buildjob processor
// which connectors derive api.requests from spans (APIRequestsFromSpans),
// so that the two never count the same requests.
type factory struct {
	connector.Factory
	connectors *connectors
}

// APIRequestsFromSpans lists the connectors created by this factory that
// derive api.requests from SERVER spans.
func (f *factory) APIRequestsFromSpans() []component.ID {
	return f.connectors.apiRequestsFromSpans()
}

// NewFactory returns the factory of the buildjob connector. The traces and
// logs instances it creates for one component id share their state.
func NewFactory() connector.Factory {
	f := &factory{connectors: newConnectors()}
	f.Factory = connector.NewFactory(
		metadata.Type,
		createDefaultConfig,
		connector.WithTracesToMetrics(f.createTracesToMetrics, metadata.TracesToMetricsStability),
		connector.WithLogsToMetrics(f.createLogsToMetrics, metadata.LogsToMetricsStability),
	)
	return f
}

func (f *factory) get(set connector.Settings, cfg component.Config, next consumer.Metrics) (*sharedConnector, error) {
	ccfg := cfg.(*Config)
	return f.connectors.get(set, ccfg, func() (derive.JobSpec, error) {
		tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
		if err != nil {
			return derive.JobSpec{}, err
		}
		return derive.JobSpec{
			Output:    ccfg.OutputConfig,
			Jobs:      ccfg.JobConfig,
			ScopeName: metadata.ScopeName,
			Telemetry: derive.Telemetry{
				FlushesFailed:       tb.BuildjobFlushesFailed,
				PointsDropped:       tb.BuildjobPointsDropped,
				RecordsSkipped:      tb.RegisterBuildjobRecordsSkippedCallback,
				RecordsDeduplicated: tb.RegisterBuildjobRecordsDeduplicatedCallback,
				RunsEvicted:         tb.RegisterBuildjobRunsEvictedCallback,
				StateEntriesSkipped: tb.RegisterBuildjobStateEntriesSkippedCallback,
				StateRunsEvicted:    tb.RegisterBuildjobStateRunsEvictedCallback,
				StateWriteFailures:  tb.RegisterBuildjobStateWriteFailuresCallback,
				GPUFiguresSkipped:   tb.RegisterBuildjobGpuFiguresSkippedCallback,
				GPUOverlappingRuns:  tb.RegisterBuildjobGpuOverlappingRunsCallback,
				Shutdown:            tb.Shutdown,
			},
		}, nil
	}, next)
}

func (f *factory) createTracesToMetrics(_ context.Context, set connector.Settings, cfg component.Config, next consumer.Metrics) (connector.Traces, error) {
	c, err := f.get(set, cfg, next)
	if err != nil {
		return nil, err
	}
	return &tracesConnector{signalConnector{shared: c}}, nil
}

func (f *factory) createLogsToMetrics(_ context.Context, set connector.Settings, cfg component.Config, next consumer.Metrics) (connector.Logs, error) {
	c, err := f.get(set, cfg, next)
	if err != nil {
		return nil, err
	}
	return &logsConnector{signalConnector{shared: c}}, nil
}
