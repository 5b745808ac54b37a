// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package derive is the derivation shared by the buildjob connector and the
// buildjob processor: build job, stage and API request metrics from spans,
// job status log records and HTTP server histograms, each run and request
// counted once, with the state optionally persisted in a storage extension
// so that a restarted collector neither loses nor repeats a count. See
// README.md.
package derive // import "github.com/gpubuild/otelcol-gpubuild/internal/buildjob/derive"
