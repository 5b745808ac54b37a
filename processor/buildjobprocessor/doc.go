// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package buildjobprocessor provides the buildjob processor (metrics ->
// metrics): it derives api.requests from the build service's HTTP server
// duration histograms and passes every metric through unchanged. The
// buildjob connector (connector/buildjobconnector) derives the job, stage
// and span-based API metrics; both share internal/buildjob/derive.
//
//go:generate mdatagen metadata.yaml
package buildjobprocessor // import "github.com/gpubuild/otelcol-gpubuild/processor/buildjobprocessor"
