// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package buildjobprocessor // import "github.com/gpubuild/otelcol-gpubuild/processor/buildjobprocessor"

import (
	"errors"

	"go.opentelemetry.io/collector/component"

	"github.com/gpubuild/otelcol-gpubuild/internal/buildjob/derive"
	"github.com/gpubuild/otelcol-gpubuild/internal/buildjob/derivestate"
)

// Config is the configuration of the buildjob processor.
type Config struct {
	derive.OutputConfig `mapstructure:",squash"`

	// Cumulative sets the rules for the first and future points of the
	// service's cumulative histograms.
	Cumulative derive.CumulativeConfig `mapstructure:"cumulative"`

	// State keeps the cumulative baselines and the derived counts not yet
	// handed over in a storage extension, so that a restart neither
	// repeats nor loses a request.
	State derivestate.Config `mapstructure:"state"`

	// prevent unkeyed literal initialization
	_ struct{}
}

var _ component.Config = (*Config)(nil)

func createDefaultConfig() component.Config {
	return &Config{OutputConfig: derive.DefaultOutputConfig(), Cumulative: derive.DefaultCumulativeConfig(), State: derivestate.DefaultConfig()}
}

// Validate checks the processor settings; each error names its field.
func (cfg *Config) Validate() error {
	errs := cfg.Problems()
	errs = append(errs, cfg.Cumulative.Problems()...)
	errs = append(errs, cfg.State.Problems()...)
	return errors.Join(errs...)
}
