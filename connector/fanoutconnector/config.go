// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package fanoutconnector // import "github.com/gpubuild/otelcol-gpubuild/connector/fanoutconnector"

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"
)

// Config of the fanout connector.
type Config struct {
	// RetryInterval is how soon a batch a pipeline refused is offered to it
	// again; it doubles with each refusal in a row, up to MaxRetryInterval.
	RetryInterval time.Duration `mapstructure:"retry_interval"`
	// MaxRetryInterval caps the wait between offers.
	MaxRetryInterval time.Duration `mapstructure:"max_retry_interval"`
	// HoldMaxPoints bounds, per pipeline, the data points held for it while
	// it refuses; past it new batches for that pipeline are dropped (counted
	// and logged), never refused upstream.
	HoldMaxPoints int `mapstructure:"hold_max_points"`

	// prevent unkeyed literal initialization
	_ struct{}
}

func createDefaultConfig() component.Config {
	return &Config{RetryInterval: time.Second, MaxRetryInterval: 30 * time.Second, HoldMaxPoints: 200_000}
}

// Validate checks the configuration; each error names its field.
func (c *Config) Validate() error {
	var errs []error
	if c.RetryInterval <= 0 {
		errs = append(errs, fmt.Errorf("retry_interval: must be positive, got %v", c.RetryInterval))
	}
	if c.MaxRetryInterval < c.RetryInterval {
		errs = append(errs, fmt.Errorf("max_retry_interval: must be at least retry_interval (%v), got %v", c.RetryInterval, c.MaxRetryInterval))
	}
	if c.HoldMaxPoints <= 0 {
		errs = append(errs, fmt.Errorf("hold_max_points: must be positive, got %d", c.HoldMaxPoints))
	}
	return errors.Join(errs...)
}
