// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package translate // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/translate"

import (
	"time"

	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
)

// ToInput builds the SDK request. The SDK wants pointers; they point into
// the datums and a few per-request arrays instead of one allocation per field.
func ToInput(namespace string, datums []Datum) *cloudwatch.PutMetricDataInput {
	nDims, nStats := 0, 0
	for i := range datums {
		nDims += len(datums[i].Dims)
		if datums[i].Kind == KindStatistics {
			nStats++
		}
	}
	out := make([]types.MetricDatum, len(datums))
	dims := make([]types.Dimension, 0, nDims)
	times := make([]time.Time, len(datums))
	stats := make([]types.StatisticSet, 0, nStats)
	for i := range datums {
		d := &datums[i]
		times[i] = d.Timestamp.AsTime()
		md := &out[i]
		md.MetricName = &d.Name
		md.Timestamp = &times[i]
		md.Unit = d.Unit.standard()
		md.StorageResolution = &d.Resolution
		if len(d.Dims) > 0 {
			start := len(dims)
			for j := range d.Dims {
				dims = append(dims, types.Dimension{Name: &d.Dims[j].Name, Value: &d.Dims[j].Value})
			}
			md.Dimensions = dims[start:len(dims):len(dims)]
		}
		switch d.Kind {
		case KindValue:
			md.Value = &d.Value
		case KindStatistics:
			stats = append(stats, types.StatisticSet{
				SampleCount: &d.Floats[0], Sum: &d.Floats[1],
				Minimum: &d.Floats[2], Maximum: &d.Floats[3],
			})
			md.StatisticValues = &stats[len(stats)-1]
		case KindValues:
			md.Values = d.Values()
			md.Counts = d.Counts()
		}
	}
	return &cloudwatch.PutMetricDataInput{Namespace: &namespace, MetricData: out}
}
