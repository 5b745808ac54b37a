// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package nvmlsamplerextension keeps a bounded ring of GPU samples (the
// energy counter, utilization, the memory of each process) taken through
// NVML, for components that join GPU use to what the build service did:
// the buildjob connector asks it for the samples of a run's window.
// Building it needs cgo; without cgo, or without NVML at run time, it stays
// dormant and answers with no samples.
//
//go:generate mdatagen metadata.yaml
package nvmlsamplerextension // import "github.com/gpubuild/otelcol-gpubuild/extension/nvmlsamplerextension"
