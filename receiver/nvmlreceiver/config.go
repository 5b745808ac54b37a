// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package nvmlreceiver // import "github.com/gpubuild/otelcol-gpubuild/receiver/nvmlreceiver"

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/scraper/scraperhelper"

	"github.com/gpubuild/otelcol-gpubuild/internal/nvmlapi"
	"github.com/gpubuild/otelcol-gpubuild/receiver/nvmlreceiver/internal/metadata"
)

const defaultCollectionInterval = 10 * time.Second

// Config configures the nvml receiver.
type Config struct {
	scraperhelper.ControllerConfig `mapstructure:",squash"`
	metadata.MetricsBuilderConfig  `mapstructure:",squash"`

	// InitRetryInterval is the wait before the first new attempt to load
	// NVML (or to find GPUs) while it has none, and between looks for a
	// lost GPU.
	InitRetryInterval time.Duration `mapstructure:"init_retry_interval"`
	// InitRetryMaxInterval caps the wait between attempts to load NVML,
	// which doubles after each consecutive failed attempt.
	InitRetryMaxInterval time.Duration `mapstructure:"init_retry_max_interval"`

	// Devices limits the scrape to these physical GPUs, each given by NVML
	// index ("0") or UUID ("GPU-..."). Empty means every GPU. MIG instances
	// follow their parent GPU.
	Devices []string `mapstructure:"devices"`

	// PerProcess turns the gpu.process.* metrics (and the NVML process and
	// /proc lookups behind them) on or off.
	PerProcess bool `mapstructure:"per_process"`

	// NVMLSession names an nvml_sampler extension whose NVML session the
	// receiver uses instead of loading its own: one NVML in the process.
	// Unset: the receiver loads NVML itself.
	NVMLSession *component.ID `mapstructure:"nvml_session"`

	// prevent unkeyed literal initialization
	_ struct{}
}

func createDefaultConfig() *Config {
	controller := scraperhelper.NewDefaultControllerConfig()
	controller.CollectionInterval = defaultCollectionInterval
	return &Config{
		ControllerConfig:     controller,
		MetricsBuilderConfig: metadata.NewDefaultMetricsBuilderConfig(),
		InitRetryInterval:    nvmlapi.DefaultInitRetryInterval,
		InitRetryMaxInterval: nvmlapi.DefaultInitRetryMaxInterval,
		PerProcess:           true,
	}
}

// Unmarshal accepts device indices written as YAML integers
// (devices: [0, 1]) as well as strings, which the strict decoder would refuse.
func (cfg *Config) Unmarshal(conf *confmap.Conf) error {
	if raw, ok := conf.Get("devices").([]any); ok {
		devices := make([]any, len(raw))
		for i, d := range raw {
			switch v := d.(type) {
			case int, int64, uint64:
				devices[i] = fmt.Sprint(v)
			default:
				devices[i] = d
			}
		}
		if err := conf.Merge(confmap.NewFromStringMap(map[string]any{"devices": devices})); err != nil {
			return err
		}
	}
	return conf.Unmarshal(cfg)
}

// Validate checks the receiver-specific settings; scraperhelper and
// mdatagen validate their own embedded parts.
func (cfg *Config) Validate() error {
	var errs []error
	errs = append(errs, nvmlapi.ValidateInitRetry(cfg.InitRetryInterval, cfg.InitRetryMaxInterval)...)
	seen := make(map[string]struct{}, len(cfg.Devices))
	for i, d := range cfg.Devices {
		if err := validateDeviceSelector(d); err != nil {
			errs = append(errs, fmt.Errorf("devices[%d]: %w", i, err))
			continue
		}
		if _, dup := seen[d]; dup {
			errs = append(errs, fmt.Errorf("devices[%d]: %q is listed twice", i, d))
		}
		seen[d] = struct{}{}
	}
	return errors.Join(errs...)
}

func validateDeviceSelector(d string) error {
	switch {
	case d == "":
		return errors.New("must not be empty")
	case strings.HasPrefix(d, "GPU-"):
		return nil
	}
	idx, err := strconv.Atoi(d)
	if err != nil || idx < 0 {
		return fmt.Errorf("%q is neither a GPU index (0, 1, ...) nor a GPU UUID (GPU-...)", d)
	}
	return nil
}
