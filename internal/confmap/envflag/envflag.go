// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package envflag reads the distribution's boolean switches from its
// environment, all the same way: unset or blank is the default, and a
// value strconv.ParseBool does not accept is an error naming the variable,
// never a silent default.
package envflag // import "github.com/gpubuild/otelcol-gpubuild/internal/confmap/envflag"

import (
	"fmt"
	"strconv"
	"strings"
)

// Bool reads the switch name through lookupEnv (os.LookupEnv, or a test's).
func Bool(lookupEnv func(string) (string, bool), name string, def bool) (bool, error) {
	v, ok := lookupEnv(name)
	trimmed := strings.TrimSpace(v)
	if !ok || trimmed == "" {
		return def, nil
	}
	b, err := strconv.ParseBool(trimmed)
	if err != nil {
		return false, fmt.Errorf("%s: %q is not a boolean (use true or false)", name, v)
	}
	return b, nil
}
