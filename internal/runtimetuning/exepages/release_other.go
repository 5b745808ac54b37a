// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package exepages

// Release does nothing outside Linux.
func Release() error { return nil }
