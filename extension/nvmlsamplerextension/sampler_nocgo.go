// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !cgo

package nvmlsamplerextension // import "github.com/gpubuild/otelcol-gpubuild/extension/nvmlsamplerextension"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.uber.org/zap"

	"github.com/gpubuild/otelcol-gpubuild/internal/gpucost"
)

// sampler without cgo: go-nvml needs cgo, so this build has no samples. It
// still starts, so one configuration serves both builds, and says why.
type sampler struct {
	cfg    *Config
	logger *zap.Logger
}

func newSampler(cfg *Config, logger *zap.Logger) *sampler { return &sampler{cfg: cfg, logger: logger} }

func (s *sampler) Start(context.Context, component.Host) error {
	s.logger.Warn("GPU support is not compiled in: this collector was built with CGO_ENABLED=0, " +
		"and NVML needs cgo; the nvml_sampler extension takes no samples, so there is no GPU cost per build")
	return nil
}

func (*sampler) Shutdown(context.Context) error { return nil }

func (*sampler) Samples(time.Time, time.Time) []gpucost.Series { return nil }

func (s *sampler) MaxGap() time.Duration { return s.cfg.maxGap() }
