// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package temporalityprocessor provides the temporality processor: it turns
// delta series into cumulative ones (to: cumulative) or cumulative series
// into deltas (to: delta), with its per-series state saved in a storage
// extension so that a restarted collector goes on from each series' last
// point: a store never sees a series reset or an increment twice because
// the collector restarted. It is internal/cumulative's tracker, the one the
// CloudWatch exporter converts with, as a pipeline component.
//
//go:generate mdatagen metadata.yaml
package temporalityprocessor // import "github.com/gpubuild/otelcol-gpubuild/processor/temporalityprocessor"
