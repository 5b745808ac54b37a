// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package buildjobprocessor // import "github.com/gpubuild/otelcol-gpubuild/processor/buildjobprocessor"

import (
	"context"
	"fmt"
	"strings"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor/processorhelper"

	"github.com/gpubuild/otelcol-gpubuild/internal/buildjob/derive"
	"github.com/gpubuild/otelcol-gpubuild/internal/state"
)

// buildjobProcessor derives api.requests from the service's HTTP server
// duration histograms and passes every metric through unchanged.
type buildjobProcessor struct {
	id         component.ID
	cfg        *Config
	derivation *derive.Derivation
	// standDown: a buildjob connector of the same collector derives
	// api.requests from spans, so this processor passes metrics through
	// and derives nothing (every request would otherwise count twice).
	standDown bool
}

// Start stands the processor down beside a connector that derives
// api.requests from spans, or opens its state (saying when it is in memory
// only) and starts the derivation.
func (p *buildjobProcessor) Start(ctx context.Context, host component.Host) error {
	if ids := connectorsCountingAPIRequests(host); len(ids) > 0 {
		names := make([]string, len(ids))
		for i, id := range ids {
			names[i] = fmt.Sprintf("connector %q", id)
		}
		p.standDown = true
		p.derivation.Logger().Warn(fmt.Sprintf("processor %q derives nothing: %s derives api.requests from spans (api_requests_from_spans: true), and counting the HTTP server histograms too would count every request twice; the processor passes metrics through unchanged",
			p.id, strings.Join(names, " and ")))
		return nil
	}
	if p.cfg.State.Storage != nil {
		if err := p.derivation.OpenState(ctx, host, p.cfg.State); err != nil {
			return err
		}
	} else {
		state.WarnInMemory(p.derivation.Logger(), "derivation state", "state",
			"a restart counts the service's cumulative HTTP histograms again from their start and loses the counts not yet emitted")
	}
	p.derivation.Start()
	return nil
}

// Shutdown emits what is left and closes the state; standing down, it
// only releases the derivation's telemetry.
func (p *buildjobProcessor) Shutdown(ctx context.Context) error {
	if p.standDown {
		p.derivation.Discard()
		return nil
	}
	return p.derivation.Shutdown(ctx)
}

// processMetrics derives from md and hands it on unchanged. A batch
// without data points (the nvml receiver's scrape on a node without NVML,
// every collection_interval) is not handed on: it would wake the exporter
// and write an empty request to its persistent queue.
func (p *buildjobProcessor) processMetrics(ctx context.Context, md pmetric.Metrics) (pmetric.Metrics, error) {
	if md.DataPointCount() == 0 {
		return md, processorhelper.ErrSkipProcessingData
	}
	if !p.standDown {
		p.derivation.ConsumeHTTPMetrics(ctx, md)
	}
	return md, nil
}
