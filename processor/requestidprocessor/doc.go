// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:generate mdatagen metadata.yaml

// Package requestidprocessor stamps each metrics request of a fleet
// sidecar with an identity fixed before the exporter's persistent queue:
// the process's random instance id and a sequence number. The gateway's
// intervalmerge processor drops a request whose identity it merged before.
package requestidprocessor // import "github.com/gpubuild/otelcol-gpubuild/processor/requestidprocessor"
