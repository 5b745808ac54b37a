// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build tools

// Package lint pins golangci-lint at an exact version, in a module of its own
// so that its many dependencies never move the collector's. The Makefile
// builds it into .tools/bin.
package lint

import (
	_ "github.com/golangci/golangci-lint/v2/cmd/golangci-lint"
)
