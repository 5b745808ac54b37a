// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package temporalityprocessor // import "github.com/gpubuild/otelcol-gpubuild/processor/temporalityprocessor"

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"

	"github.com/gpubuild/otelcol-gpubuild/internal/cumulative"
	"github.com/gpubuild/otelcol-gpubuild/internal/state"
)

// Temporalities the processor converts to.
const (
	ToCumulative = "cumulative"
	ToDelta      = "delta"
)

// Config of the temporality processor.
type Config struct {
	// To is the temporality every sum and histogram leaves with:
	// "cumulative" (for Prometheus, remote write and cumulative OTLP
	// stores) or "delta".
	To string `mapstructure:"to"`
	// MaxSeries bounds the series whose state is kept; past it the least
	// recently seen series are forgotten (counted).
	MaxSeries int `mapstructure:"max_series"`
	// MaxStale forgets a series not seen for this long. A forgotten
	// cumulative series starts again from its next delta, with that
	// point's start time.
	MaxStale time.Duration `mapstructure:"max_stale"`
	// MaxAge (to: delta): the first point of a series never seen before is
	// sent whole (the delta since its start) only when that start is at
	// most this long ago; an older start makes it a baseline. 0: no limit.
	MaxAge time.Duration `mapstructure:"max_age"`
	// FutureTolerance: a point stamped more than this ahead of the
	// collector's clock is dropped (from_future) and never becomes its
	// series' last point. 0 turns the check off.
	FutureTolerance time.Duration `mapstructure:"future_tolerance"`
	// State says where the per-series state is saved.
	State state.Config `mapstructure:"state"`

	// prevent unkeyed literal initialization
	_ struct{}
}

func createDefaultConfig() component.Config {
	return &Config{
		To:              ToCumulative,
		MaxSeries:       20_000,
		MaxStale:        24 * time.Hour,
		MaxAge:          cumulative.DefaultMaxAge,
		FutureTolerance: cumulative.DefaultFutureTolerance,
		State:           state.DefaultConfig(),
	}
}

// Validate checks the configuration; each error names its field.
func (c *Config) Validate() error {
	var errs []error
	if c.To != ToCumulative && c.To != ToDelta {
		errs = append(errs, fmt.Errorf("to: %q is not a temporality (accepted: %s, %s)", c.To, ToCumulative, ToDelta))
	}
	if c.MaxSeries <= 0 {
		errs = append(errs, fmt.Errorf("max_series: must be positive, got %d", c.MaxSeries))
	}
	if c.MaxStale <= 0 {
		errs = append(errs, fmt.Errorf("max_stale: must be positive, got %v", c.MaxStale))
	}
	if c.MaxAge < 0 {
		errs = append(errs, fmt.Errorf("max_age: must not be negative, got %v", c.MaxAge))
	}
	if c.FutureTolerance < 0 {
		errs = append(errs, fmt.Errorf("future_tolerance: must not be negative, got %v", c.FutureTolerance))
	}
	errs = append(errs, c.State.Problems("state")...)
	return errors.Join(errs...)
}

func (c *Config) trackerConfig() cumulative.Config {
	return cumulative.Config{
		TTL:             c.MaxStale,
		MaxSeries:       c.MaxSeries,
		MaxAge:          c.MaxAge,
		FutureTolerance: c.FutureTolerance,
		// Stores that take deltas take summaries as they are.
		KeepSummaries: true,
	}
}
