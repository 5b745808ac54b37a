// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package writefailure is the exporter's stage in front of a persistent
// sending queue. exporterhelper's persistent queue hands a failed storage
// write (a full or failing disk) back to the caller as a plain error.
// Passed upstream as is, the data would be refused although it was
// accepted by the exporter's delta conversion, and a full disk would look
// like any other error. Here such data is held in memory, in order ahead
// of what comes next, up to write_failure_buffer_bytes, and written as soon
// as the queue takes it again; past the bound it is refused with a
// retryable error (OTLP clients retry) and the exporter undoes its
// conversion. A reserve file (reserve.go) keeps room on the queue's volume
// for the queue's own reads and deletes.
package writefailure // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/writefailure"
