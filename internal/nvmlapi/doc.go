// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package nvmlapi is the NVML boundary the nvml receiver and the nvml
// sampler extension share: the parts of go-nvml they call, a loader that
// retries dlopen, and the lookup of the entry points the loaded library has.
//
// Everything but this file needs cgo (go-nvml does).
package nvmlapi // import "github.com/gpubuild/otelcol-gpubuild/internal/nvmlapi"
