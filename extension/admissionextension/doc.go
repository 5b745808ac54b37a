// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package admissionextension bounds the OTLP requests in flight across all
// connections, before an HTTP body is read and before a gRPC request enters
// the pipeline.
//
//go:generate mdatagen metadata.yaml
package admissionextension // import "github.com/gpubuild/otelcol-gpubuild/extension/admissionextension"
