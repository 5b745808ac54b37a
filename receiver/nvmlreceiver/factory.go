// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package nvmlreceiver // import "github.com/gpubuild/otelcol-gpubuild/receiver/nvmlreceiver"

import (
	"context"
	"errors"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/scraper"
	"go.opentelemetry.io/collector/scraper/scraperhelper"

	"github.com/gpubuild/otelcol-gpubuild/receiver/nvmlreceiver/internal/metadata"
)

// NewFactory returns the factory of the nvml receiver.
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
		return nil, errors.New("nvml: unexpected config type")
	}
	return newReceiver(rCfg, set, next, newGPUScraper(rCfg, set))
}

func newReceiver(cfg *Config, set receiver.Settings, next consumer.Metrics, s *gpuScraper) (receiver.Metrics, error) {
	return newPacedReceiver(cfg, set, next, s, realPacerClock)
}

// newPacedReceiver drives the controller from the scraper's pacer instead of
// a fixed ticker: without a GPU there is nothing to scrape until the next
// NVML attempt, so nothing should wake before it.
func newPacedReceiver(cfg *Config, set receiver.Settings, next consumer.Metrics, s *gpuScraper, clock pacerClock) (receiver.Metrics, error) {
	s.pace = newPacer(cfg.CollectionInterval, clock)
	sc, err := scraper.NewMetrics(s.scrape, scraper.WithStart(s.start), scraper.WithShutdown(s.shutdown))
	if err != nil {
		return nil, err
	}
	return scraperhelper.NewMetricsController(&cfg.ControllerConfig, set, next,
		scraperhelper.AddMetricsScraper(metadata.Type, sc), scraperhelper.WithTickerChannel(s.pace.C()))
}
