// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter"

import (
	"time"

	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
) // toInput builds the SDK request. The SDK wants pointers; they point into
// the datums and a few per-request arrays instead of one allocation per field.
func toInput(namespace string, datums []datum) *cloudwatch.PutMetricDataInput {
	nDims, nStats := 0, 0
	for i := range datums {
		nDims += len(datums[i].dims)
		if datums[i].kind == kindStatistics {
			nStats++
		}
	}
	out := make([]types.MetricDatum, len(datums))
	dims := make([]types.Dimension, 0, nDims)
	times := make([]time.Time, len(datums))
	stats := make([]types.StatisticSet, 0, nStats)
	for i := range datums {
		d := &datums[i]
		times[i] = d.timestamp.AsTime()
		md := &out[i]
		md.MetricName = &d.name
		md.Timestamp = &times[i]
		md.Unit = d.unit.standard()
		md.StorageResolution = &d.resolution
		if len(d.dims) > 0 {
			start := len(dims)
			for j := range d.dims {
				dims = append(dims, types.Dimension{Name: &d.dims[j].name, Value: &d.dims[j].value})
			}
			md.Dimensions = dims[start:len(dims):len(dims)]
		}
		switch d.kind {
		case kindValue:
			md.Value = &d.value
		case kindStatistics:
			stats = append(stats, types.StatisticSet{
				SampleCount: &d.floats[0], Sum: &d.floats[1],
				Minimum: &d.floats[2], Maximum: &d.floats[3],
			})
			md.StatisticValues = &stats[len(stats)-1]
		case kindValues:
			md.Values = d.values()
			md.Counts = d.counts()
		}
	}
	return &cloudwatch.PutMetricDataInput{Namespace: &namespace, MetricData: out}
}
