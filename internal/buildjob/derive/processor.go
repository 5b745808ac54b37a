package derive

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// ProcessorSpec is what a processor component hands the shared derivation.
type ProcessorSpec struct {
	ID        component.ID
	Output    OutputConfig
	ScopeName string // instrumentation scope of the derived metrics
	Telemetry Telemetry
	// ConnectorType is the type of the connector that can also derive
	// api.requests (from spans); Start refuses to run beside one that does.
	ConnectorType component.Type
}

// HTTPProcessor derives api.requests from HTTP server duration histograms
// and passes every metric through unchanged.
type HTTPProcessor struct {
	spec    ProcessorSpec
	emitter *emitter
}

// NewHTTPProcessor returns a processor that emits to next.
func NewHTTPProcessor(set component.TelemetrySettings, spec ProcessorSpec, next consumer.Metrics) *HTTPProcessor {
	d := newProcessorDeriver(&spec.Output, time.Now())
	d.scopeName = spec.ScopeName
	return &HTTPProcessor{spec: spec, emitter: newEmitter(set, spec.Telemetry, d, spec.Output.MetricsFlushInterval, next)}
}

// factoryHost is implemented by the collector's host: it hands out the
// factories of the running collector.
type factoryHost interface {
	GetFactory(kind component.Kind, componentType component.Type) component.Factory
}

// APIRequestSources is implemented by the connector factory: the
// connectors it created that derive api.requests from spans.
type APIRequestSources interface {
	APIRequestsFromSpans() []component.ID
}

// Start fails when a connector of the same collector also derives
// api.requests (from spans): every request would be counted twice.
func (p *HTTPProcessor) Start(_ context.Context, host component.Host) error {
	if fh, ok := host.(factoryHost); ok {
		if src, ok := fh.GetFactory(component.KindConnector, p.spec.ConnectorType).(APIRequestSources); ok {
			if ids := src.APIRequestsFromSpans(); len(ids) > 0 {
				names := make([]string, len(ids))
				for i, id := range ids {
					names[i] = fmt.Sprintf("connector %q", id)
				}
				return fmt.Errorf("processor %q derives api.requests from HTTP server histograms and %s derives it from spans (api_requests_from_spans: true): every request would be counted twice; set api_requests_from_spans: false on the connector or remove the processor from the pipeline",
					p.spec.ID, strings.Join(names, " and "))
			}
		}
	}
	p.emitter.start()
	return nil
}

// Shutdown emits what was derived since the last flush.
func (p *HTTPProcessor) Shutdown(ctx context.Context) error {
	return p.emitter.shutdown(ctx)
}

// ProcessMetrics derives api.requests from md and returns md unchanged.
func (p *HTTPProcessor) ProcessMetrics(ctx context.Context, md pmetric.Metrics) (pmetric.Metrics, error) {
	p.emitter.update(ctx, func(d *deriver, now time.Time) { d.consumeHTTPMetrics(md, now) })
	return md, nil
}
