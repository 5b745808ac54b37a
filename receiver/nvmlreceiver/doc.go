// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:generate mdatagen metadata.yaml

// Package nvmlreceiver scrapes NVIDIA GPU metrics through NVML (the library
// behind nvidia-smi). Building it needs cgo; without cgo the receiver still
// compiles, starts and logs that GPU support is not compiled in.
package nvmlreceiver // import "github.com/gpubuild/otelcol-gpubuild/receiver/nvmlreceiver"
