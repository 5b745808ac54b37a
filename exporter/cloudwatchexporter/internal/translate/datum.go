// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package translate // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/translate"

import "go.opentelemetry.io/collector/pdata/pcommon"

// DatumKind says which of Value, StatisticValues or Values a datum carries.
type DatumKind uint8

// The datum kinds.
const (
	KindValue DatumKind = iota
	KindStatistics
	KindValues
)

// StatisticSet is CloudWatch's StatisticSet.
type StatisticSet struct {
	SampleCount, Sum, Min, Max float64
}

// Datum is one CloudWatch MetricDatum, already within CloudWatch's limits.
// A flush holds tens of thousands of them while its requests are sent, so
// the fields every kind needs are inline and the rest share one slice
// (96 bytes a datum).
type Datum struct {
	Name string
	Dims []Dimension
	// Floats points into translation.floats: for kindValues the values, then
	// as many counts; for kindStatistics sampleCount, sum, min and max.
	Floats    []float64
	Timestamp pcommon.Timestamp
	Value     float64 // kindValue
	// Point indexes translation.points: the data point this datum comes from.
	// The datums of one point are adjacent.
	Point      int32
	Resolution int32
	Kind       DatumKind
	Unit       UnitID
}

// Values and counts are a kindValues datum's Values and Counts.
func (d *Datum) Values() []float64 { return d.Floats[:len(d.Floats)/2] }

// Counts is a KindValues datum's Counts.
func (d *Datum) Counts() []float64 { return d.Floats[len(d.Floats)/2:] }

// Stats is a kindStatistics datum's StatisticValues.
func (d *Datum) Stats() StatisticSet {
	return StatisticSet{SampleCount: d.Floats[0], Sum: d.Floats[1], Min: d.Floats[2], Max: d.Floats[3]}
}

// PointRef locates a data point in the pmetric.Metrics it was translated from.
type PointRef struct {
	Resource, Scope, Metric, Point int32
}

// Translation is the result of translating one pmetric.Metrics. Its slices
// are reused from one export to the next (see translator.pool).
type Translation struct {
	Datums  []Datum
	Points  []PointRef
	Dropped DropCounts
	Altered AlterCounts
	// resAltered: how the current resource's dimensions were altered.
	resAltered alteration

	// Arenas the datums' slices point into, and scratch space.
	dims    []Dimension
	floats  []float64
	resDims []Dimension
	buckets []bucket
	values  []float64
	counts  []float64
	reps    []float64
}

// Reset empties tr, keeping its buffers.
func (tr *Translation) Reset() {
	clear(tr.Datums) // drop references to the previous batch's strings
	tr.Datums = tr.Datums[:0]
	tr.Points = tr.Points[:0]
	tr.Dropped = DropCounts{}
	tr.Altered = AlterCounts{}
	tr.resAltered = 0
	clear(tr.dims)
	tr.dims = tr.dims[:0]
	tr.floats = tr.floats[:0]
	tr.resDims = tr.resDims[:0]
}
