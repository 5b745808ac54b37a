// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package nvmlsamplerextension // import "github.com/gpubuild/otelcol-gpubuild/extension/nvmlsamplerextension"

import (
	"errors"
	"fmt"
	"time"

	"github.com/gpubuild/otelcol-gpubuild/internal/nvmlapi"
)

const (
	defaultSamplingInterval = time.Second
	defaultRetention        = 35 * time.Minute // longer than the buildjob connector's default job_timeout
	// minMaxGap is the shortest gap between samplings that voids a window.
	minMaxGap = 2 * time.Second
	// maxReadSpan is the longest energy counter read that is kept: its
	// time is known to half of it, 12.5 ms, 4 J at 300 W.
	maxReadSpan = 25 * time.Millisecond
	// maxRingTicks bounds each GPU's ring whatever retention and interval say.
	maxRingTicks = 1 << 20
)

// Config configures the nvml_sampler extension.
type Config struct {
	// SamplingInterval is how often each GPU is sampled. A run's energy is
	// interpolated between the samples around its start and end, so a
	// shorter interval follows power changes more closely.
	SamplingInterval time.Duration `mapstructure:"sampling_interval"`
	// Retention is how far back the ring keeps samples: a run longer than
	// this gets no GPU figures.
	Retention time.Duration `mapstructure:"retention"`
	// InitRetryInterval is the wait before the first new attempt to load
	// NVML (or to find GPUs) while it has none.
	InitRetryInterval time.Duration `mapstructure:"init_retry_interval"`
	// InitRetryMaxInterval caps the wait, which doubles after each
	// consecutive failed attempt.
	InitRetryMaxInterval time.Duration `mapstructure:"init_retry_max_interval"`

	// prevent unkeyed literal initialization
	_ struct{}
}

func createDefaultConfig() *Config {
	return &Config{
		SamplingInterval:     defaultSamplingInterval,
		Retention:            defaultRetention,
		InitRetryInterval:    nvmlapi.DefaultInitRetryInterval,
		InitRetryMaxInterval: nvmlapi.DefaultInitRetryMaxInterval,
	}
}

// Validate checks the settings.
func (cfg *Config) Validate() error {
	var errs []error
	if cfg.SamplingInterval <= 0 {
		errs = append(errs, fmt.Errorf("sampling_interval: must be positive, got %s", cfg.SamplingInterval))
	}
	errs = append(errs, nvmlapi.ValidateInitRetry(cfg.InitRetryInterval, cfg.InitRetryMaxInterval)...)
	switch {
	case cfg.Retention <= 0:
		errs = append(errs, fmt.Errorf("retention: must be positive, got %s", cfg.Retention))
	case cfg.SamplingInterval > 0 && cfg.Retention < cfg.SamplingInterval:
		errs = append(errs, fmt.Errorf("retention: must be at least sampling_interval (%s), got %s", cfg.SamplingInterval, cfg.Retention))
	case cfg.SamplingInterval > 0 && cfg.Retention/cfg.SamplingInterval > maxRingTicks:
		errs = append(errs, fmt.Errorf("retention: at most %d samplings per GPU, got %s at sampling_interval %s",
			maxRingTicks, cfg.Retention, cfg.SamplingInterval))
	}
	return errors.Join(errs...)
}

// ticks is how many samplings the ring keeps, with room for the sampling
// on demand and one before the oldest window.
func (cfg *Config) ticks() int {
	return int(cfg.Retention/cfg.SamplingInterval) + 2
}

// maxGap tolerates one missed sampling (a slow NVML call), and at short
// intervals a sampler descheduled for up to two seconds on a busy host: the
// energy counter keeps counting and the driver keeps its power readings
// (about 2.4 s) and utilization samples across such a gap, so the figures
// stay exact.
func (cfg *Config) maxGap() time.Duration {
	return max(2*cfg.SamplingInterval+cfg.SamplingInterval/2, minMaxGap)
}
