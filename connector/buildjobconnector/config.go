package buildjobconnector // import "github.com/gpubuild/otelcol-gpubuild/connector/buildjobconnector"

import (
	"errors"

	"go.opentelemetry.io/collector/component"

	"github.com/gpubuild/otelcol-gpubuild/internal/buildjob/derive"
)

// Config is the configuration of the buildjob connector.
type Config struct {
	derive.OutputConfig `mapstructure:",squash"`
	derive.JobConfig    `mapstructure:",squash"`

	// prevent unkeyed literal initialization
	_ struct{}
}

var _ component.Config = (*Config)(nil)

func createDefaultConfig() component.Config {
	return &Config{OutputConfig: derive.DefaultOutputConfig(), JobConfig: derive.DefaultJobConfig()}
}

// Validate checks the connector settings; each error names its field.
func (cfg *Config) Validate() error {
	return errors.Join(append(cfg.OutputConfig.Problems(), cfg.JobConfig.Problems()...)...)
}
