// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !cgo

package nvmlreceiver // import "github.com/gpubuild/otelcol-gpubuild/receiver/nvmlreceiver"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver"
	"go.uber.org/zap"
)

// gpuScraper without cgo: go-nvml needs cgo, so this build has no GPU
// support. The receiver still starts, so one configuration serves both
// builds, and says why it reports nothing.
type gpuScraper struct {
	logger *zap.Logger
	pace   *pacer // never armed: without NVML there is never anything to scrape
}

func newGPUScraper(_ *Config, set receiver.Settings) *gpuScraper {
	return &gpuScraper{logger: set.Logger}
}

func (s *gpuScraper) start(context.Context, component.Host) error {
	s.logger.Warn("GPU support is not compiled in: this collector was built with CGO_ENABLED=0, " +
		"and NVML needs cgo; the nvml receiver reports no metrics")
	return nil
}

func (s *gpuScraper) shutdown(context.Context) error {
	if s.pace != nil {
		s.pace.shutdown()
	}
	return nil
}

func (*gpuScraper) scrape(context.Context) (pmetric.Metrics, error) {
	return pmetric.NewMetrics(), nil
}
