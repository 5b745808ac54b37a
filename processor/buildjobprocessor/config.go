package buildjobprocessor // import "github.com/gpubuild/otelcol-gpubuild/processor/buildjobprocessor"

import (
	"errors"

	"go.opentelemetry.io/collector/component"

	"github.com/gpubuild/otelcol-gpubuild/internal/buildjob/derive"
)

// Config is the configuration of the buildjob processor.
type Config struct {
	derive.OutputConfig `mapstructure:",squash"`

	// prevent unkeyed literal initialization
	_ struct{}
}

var _ component.Config = (*Config)(nil)

func createDefaultConfig() component.Config {
	return &Config{OutputConfig: derive.DefaultOutputConfig()}
}

// Validate checks the processor settings; each error names its field.
func (cfg *Config) Validate() error {
	return errors.Join(cfg.Problems()...)
}
