// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package admissionextension // import "github.com/gpubuild/otelcol-gpubuild/extension/admissionextension"

import (
	"errors"
	"time"
)

// Config bounds the requests in flight.
type Config struct {
	// MaxInFlight is how many requests are read, decoded and processed at
	// once, across all connections and both protocols.
	MaxInFlight int `mapstructure:"max_in_flight"`
	// MaxWaiting is how many more HTTP requests may wait for a place; past
	// it a request is refused at once (503; clients retry). A gRPC request
	// never waits: without a free place it is refused with UNAVAILABLE.
	MaxWaiting int `mapstructure:"max_waiting"`
	// WaitTimeout is the longest a request waits for a place before it is refused.
	WaitTimeout time.Duration `mapstructure:"wait_timeout"`
}

// Validate checks the configuration.
func (cfg *Config) Validate() error {
	var errs []error
	if cfg.MaxInFlight <= 0 {
		errs = append(errs, errors.New("max_in_flight: must be positive"))
	}
	if cfg.MaxWaiting < 0 {
		errs = append(errs, errors.New("max_waiting: must not be negative"))
	}
	if cfg.WaitTimeout < 0 {
		errs = append(errs, errors.New("wait_timeout: must not be negative"))
	}
	return errors.Join(errs...)
}
