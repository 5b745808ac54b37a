// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package main

import "github.com/gpubuild/otelcol-gpubuild/internal/runtimetuning"

// The process settings (one P, memory given back between bursts) are all in
// internal/runtimetuning, where the linter and the tests reach them. This
// file is not generated: ocb leaves files it does not write in place.
func init() { runtimetuning.Start() }
