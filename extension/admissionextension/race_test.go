// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build race

package admissionextension

// raceEnabled: the race detector makes sync.Pool drop a random quarter of
// what is put back, so a test cannot count on a pooled buffer staying.
const raceEnabled = true
