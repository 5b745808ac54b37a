// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package exepages

// Libraries names none outside Linux.
func Libraries() ([]string, error) { return nil, nil }

// Release does nothing outside Linux.
func Release([]string) error { return nil }
