// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package storagecheckextension // import "github.com/gpubuild/otelcol-gpubuild/extension/storagecheckextension"

import (
	"errors"
	"time"
)

// Config names the file_storage directory to check.
type Config struct {
	// Directory is the file_storage extension's directory.
	Directory string `mapstructure:"directory"`
	// OpenTimeout bounds the wait for a file another process holds locked;
	// such a file is in use, not damaged, and is left alone.
	OpenTimeout time.Duration `mapstructure:"open_timeout"`
}

// Validate checks the configuration.
func (cfg *Config) Validate() error {
	var errs []error
	if cfg.Directory == "" {
		errs = append(errs, errors.New("directory: required (the file_storage directory)"))
	}
	if cfg.OpenTimeout <= 0 {
		errs = append(errs, errors.New("open_timeout: must be positive"))
	}
	return errors.Join(errs...)
}
