package buildjobprocessor // import "github.com/gpubuild/otelcol-gpubuild/processor/buildjobprocessor"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// httpProcessor derives api.requests from HTTP server duration histograms
// and passes every metric through unchanged.
type httpProcessor struct {
	emitter *emitter
}

func (p *httpProcessor) start(context.Context, component.Host) error {
	p.emitter.start()
	return nil
}

func (p *httpProcessor) shutdown(ctx context.Context) error {
	return p.emitter.shutdown(ctx)
}

func (p *httpProcessor) processMetrics(ctx context.Context, md pmetric.Metrics) (pmetric.Metrics, error) {
	p.emitter.update(ctx, func(d *deriver, now time.Time) { d.consumeHTTPMetrics(md, now) })
	return md, nil
}
