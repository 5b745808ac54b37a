// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:generate mdatagen metadata.yaml

// Package intervalmergeprocessor merges the delta series of many workers
// within each flush interval, for a gateway in front of a per-request,
// per-metric billed backend.
package intervalmergeprocessor // import "github.com/gpubuild/otelcol-gpubuild/processor/intervalmergeprocessor"
