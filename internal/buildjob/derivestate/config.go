// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package derivestate keeps the buildjob derivation's state (its run memory
// and the derived counts not yet accepted by the next consumer) in a
// storage extension: the format of its entries, reading them back at
// start, and writing what one request changed in one batch. The derivation
// hands it plain records (Series, Run) and gets plain records back
// (Snapshot); which entries changed, and what the records mean, stay with
// the derivation (internal/buildjob/derive).
package derivestate // import "github.com/gpubuild/otelcol-gpubuild/internal/buildjob/derivestate"

import (
	"errors"
	"time"

	"github.com/gpubuild/otelcol-gpubuild/internal/state"
)

// ClientName names the component's client of the storage extension;
// file_storage keeps it in the file <kind>_<type>_<name>_derivation.
const ClientName = "derivation"

// Config says where the derivation keeps its state (the run memory and
// the derived counts not yet accepted by the next consumer) so that a
// restarted or killed collector neither loses nor repeats a count.
type Config struct {
	// Storage and Journal: where the state is kept (internal/state).
	state.Config `mapstructure:",squash"`
	// MaxBytes bounds the persisted run memory; beyond it the oldest
	// counted runs are forgotten (counted and logged).
	MaxBytes int64 `mapstructure:"max_bytes"`
	// ExpiryMargin: a run not updated for job_timeout plus this margin is
	// not restored at start (the collector was down longer than that).
	ExpiryMargin time.Duration `mapstructure:"expiry_margin"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// DefaultConfig is in memory until a storage is named, with 32 MiB of run
// memory (about 150,000 runs); 10 minutes of margin; no journal until its
// directory is named.
func DefaultConfig() Config {
	return Config{Config: state.DefaultConfig(), MaxBytes: 32 << 20, ExpiryMargin: 10 * time.Minute}
}

// Problems checks the state settings, each error naming its field.
func (cfg *Config) Problems() []error {
	var errs []error
	if cfg.MaxBytes <= 0 {
		errs = append(errs, errors.New("state.max_bytes: must be positive"))
	}
	if cfg.ExpiryMargin < 0 {
		errs = append(errs, errors.New("state.expiry_margin: must not be negative"))
	}
	return append(errs, cfg.Config.Problems("state")...)
}
