// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package requestidprocessor // import "github.com/gpubuild/otelcol-gpubuild/processor/requestidprocessor"

import (
	"context"
	"fmt"
	"sync/atomic"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"

	"github.com/gpubuild/otelcol-gpubuild/internal/requestid"
	"github.com/gpubuild/otelcol-gpubuild/processor/requestidprocessor/internal/metadata"
)

// NewFactory returns the factory of the requestid processor.
func NewFactory() processor.Factory {
	return processor.NewFactory(
		metadata.Type,
		func() component.Config { return &Config{} },
		processor.WithMetrics(createMetricsProcessor, metadata.MetricsStability),
	)
}

// stamper numbers the requests of one process. The instance id is new at
// every start: a restarted sidecar's numbers never meet its predecessor's,
// whose requests still in the persistent queue keep their own stamps.
type stamper struct {
	instance string
	seq      atomic.Uint64
}

func (s *stamper) stamp(_ context.Context, md pmetric.Metrics) (pmetric.Metrics, error) {
	requestid.Stamp(md, requestid.ID{Instance: s.instance, Sequence: s.seq.Add(1)})
	return md, nil
}

func createMetricsProcessor(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Metrics) (processor.Metrics, error) {
	instance, err := requestid.NewInstance()
	if err != nil {
		return nil, fmt.Errorf("requestid: drawing the instance id: %w", err)
	}
	s := &stamper{instance: instance}
	return processorhelper.NewMetrics(ctx, set, cfg, next, s.stamp,
		processorhelper.WithCapabilities(consumer.Capabilities{MutatesData: true}))
}
