// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package storagecheckextension moves aside damaged file_storage files at
// start, so that a damaged queue or state file costs what it held, not the
// collector.
//
//go:generate mdatagen metadata.yaml
package storagecheckextension // import "github.com/gpubuild/otelcol-gpubuild/extension/storagecheckextension"
