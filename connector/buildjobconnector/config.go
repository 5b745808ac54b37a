// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package buildjobconnector // import "github.com/gpubuild/otelcol-gpubuild/connector/buildjobconnector"

import (
	"errors"

	"go.opentelemetry.io/collector/component"

	"github.com/gpubuild/otelcol-gpubuild/internal/buildjob/derive"
	"github.com/gpubuild/otelcol-gpubuild/internal/buildjob/derivestate"
)

// Config is the configuration of the buildjob connector.
type Config struct {
	derive.OutputConfig `mapstructure:",squash"`
	derive.JobConfig    `mapstructure:",squash"`

	// State keeps the run memory and the derived counts not yet handed
	// over in a storage extension, so that a restart or a kill neither
	// loses nor repeats a count.
	State derivestate.Config `mapstructure:"state"`

	// GPUSampler names an nvml_sampler extension: each counted run then
	// gets its GPU energy, busy time and peak memory (see the README).
	GPUSampler *component.ID `mapstructure:"gpu_sampler"`

	// prevent unkeyed literal initialization
	_ struct{}
}

var _ component.Config = (*Config)(nil)

func createDefaultConfig() component.Config {
	return &Config{OutputConfig: derive.DefaultOutputConfig(), JobConfig: derive.DefaultJobConfig(), State: derivestate.DefaultConfig()}
}

// Validate checks the connector settings; each error names its field.
func (cfg *Config) Validate() error {
	errs := cfg.OutputConfig.Problems()
	errs = append(errs, cfg.JobConfig.Problems()...)
	errs = append(errs, cfg.State.Problems()...)
	return errors.Join(errs...)
}
