// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derive

import (
	"go.opentelemetry.io/otel/metric"
)

// Telemetry is a component's own metrics, built from the counters its
// generated metadata defines. A counter the component does not define is nil
// and never incremented (the processor has no job runs to deduplicate or
// evict).
type Telemetry struct {
	FlushesFailed       metric.Int64Counter
	PointsDropped       metric.Int64Counter
	RecordsSkipped      metric.Int64Counter
	RecordsDeduplicated metric.Int64Counter
	RunsEvicted         metric.Int64Counter
	StateEntriesSkipped metric.Int64Counter
	StateRunsEvicted    metric.Int64Counter
	StateWriteFailures  metric.Int64Counter
	// CumulativePointsRefused: the processor's cumulative points that gave
	// no increment, by reason.
	CumulativePointsRefused metric.Int64Counter
	// GPUFiguresSkipped: GPU figures a counted run did not get, by figure
	// and reason; GPUOverlappingRuns: runs that shared a GPU with another.
	GPUFiguresSkipped  metric.Int64Counter
	GPUOverlappingRuns metric.Int64Counter
	// Shutdown releases the counters' registration; nil when there is none.
	Shutdown func()
}
