// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !race

package admissionextension

// raceEnabled: see race_test.go.
const raceEnabled = false
