// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package buildjobconnector provides the buildjob connector (traces ->
// metrics, logs -> metrics): it derives build.jobs, build.job.duration,
// build.stage.runs, build.stage.duration, build.jobs.active and, from SERVER
// spans, api.requests and api.request.duration, counting every job run
// once. The derivation is shared with the buildjob processor in
// internal/buildjob/derive.
//
//go:generate mdatagen metadata.yaml
package buildjobconnector // import "github.com/gpubuild/otelcol-gpubuild/connector/buildjobconnector"
