// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package requestidprocessor // import "github.com/gpubuild/otelcol-gpubuild/processor/requestidprocessor"

// Config of the requestid processor: it has no settings. The stamp's
// attribute names are fixed (internal/requestid) so that sidecars and
// gateways of one release agree.
type Config struct {
	// prevent unkeyed literal initialization
	_ struct{}
}

// Validate checks the configuration (there is nothing to check).
func (*Config) Validate() error { return nil }
