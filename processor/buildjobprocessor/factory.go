package buildjobprocessor // import "github.com/gpubuild/otelcol-gpubuild/processor/buildjobprocessor"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"

	"github.com/gpubuild/otelcol-gpubuild/processor/buildjobprocessor/internal/metadata"
)

// NewFactory returns the factory of the buildjob processor (metrics ->
// metrics): api.requests from HTTP server duration histograms.
func NewFactory() processor.Factory {
	return processor.NewFactory(
		metadata.Type,
		createDefaultProcessorConfig,
		processor.WithMetrics(createMetricsProcessor, metadata.MetricsStability),
	)
}

// NewConnectorFactory returns the factory of the buildjob connector (traces
// -> metrics, logs -> metrics). The instances it creates for one component
// id share their state.
func NewConnectorFactory() connector.Factory {
	shared := &sharedConnectors{byID: map[component.ID]*jobConnector{}}
	return connector.NewFactory(
		metadata.Type,
		createDefaultConfig,
		connector.WithTracesToMetrics(shared.createTracesToMetrics, metadata.TracesToMetricsStability),
		connector.WithLogsToMetrics(shared.createLogsToMetrics, metadata.LogsToMetricsStability),
	)
}

func (s *sharedConnectors) createTracesToMetrics(_ context.Context, set connector.Settings, cfg component.Config, next consumer.Metrics) (connector.Traces, error) {
	c, err := s.get(set, cfg.(*Config), next)
	if err != nil {
		return nil, err
	}
	return &tracesConnector{signalConnector{shared: c}}, nil
}

func (s *sharedConnectors) createLogsToMetrics(_ context.Context, set connector.Settings, cfg component.Config, next consumer.Metrics) (connector.Logs, error) {
	c, err := s.get(set, cfg.(*Config), next)
	if err != nil {
		return nil, err
	}
	return &logsConnector{signalConnector{shared: c}}, nil
}

func createMetricsProcessor(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Metrics) (processor.Metrics, error) {
	pcfg := cfg.(*ProcessorConfig)
	e, err := newEmitter(set.TelemetrySettings, newProcessorDeriver(pcfg, time.Now()), pcfg.MetricsFlushInterval, next)
	if err != nil {
		return nil, err
	}
	p := &httpProcessor{emitter: e}
	return processorhelper.NewMetrics(ctx, set, cfg, next, p.processMetrics,
		processorhelper.WithStart(p.start),
		processorhelper.WithShutdown(p.shutdown),
		processorhelper.WithCapabilities(consumer.Capabilities{MutatesData: false}),
	)
}
