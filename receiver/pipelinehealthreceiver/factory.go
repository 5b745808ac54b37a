// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package pipelinehealthreceiver // import "github.com/gpubuild/otelcol-gpubuild/receiver/pipelinehealthreceiver"

import (
	"context"
	"errors"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/scraper"
	"go.opentelemetry.io/collector/scraper/scraperhelper"

	"github.com/gpubuild/otelcol-gpubuild/receiver/pipelinehealthreceiver/internal/metadata"
)

// NewFactory returns the receiver's factory.
func NewFactory() receiver.Factory {
	return receiver.NewFactory(
		metadata.Type,
		func() component.Config { return createDefaultConfig() },
		receiver.WithMetrics(createMetrics, metadata.MetricsStability),
	)
}

func createMetrics(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Metrics) (receiver.Metrics, error) {
	rCfg, ok := cfg.(*Config)
	if !ok {
		return nil, errors.New("pipeline_health: unexpected config type")
	}
	s := newEndpointScraper(rCfg, set.ID.String())
	sc, err := scraper.NewMetrics(s.scrape)
	if err != nil {
		return nil, err
	}
	controller, err := scraperhelper.NewMetricsController(&rCfg.ControllerConfig, set, next, scraperhelper.AddMetricsScraper(metadata.Type, sc))
	if err != nil {
		return nil, err
	}
	return &healthReceiver{Metrics: controller, scraper: s, next: next, logger: set.Logger}, nil
}
