// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build tools

// Package tools pins the build tools (ocb, mdatagen) at exact versions.
// The Makefile builds them from this module into .tools/bin.
package tools

import (
	_ "go.opentelemetry.io/collector/cmd/builder"
	_ "go.opentelemetry.io/collector/cmd/mdatagen"
)
