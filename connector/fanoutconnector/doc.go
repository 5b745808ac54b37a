// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package fanoutconnector provides the fanout connector (metrics ->
// metrics): it hands every batch to each pipeline it feeds, one at a time,
// and keeps one pipeline's refusal from reaching the others. A pipeline that
// refuses a batch (its queue full, its disk failing) gets it again later, in
// order, from a bounded hold of its own; the others are not sent anything
// twice, which is what the collector's own fan-out does when the caller
// retries the whole batch after one exporter's error.
//
//go:generate mdatagen metadata.yaml
package fanoutconnector // import "github.com/gpubuild/otelcol-gpubuild/connector/fanoutconnector"
