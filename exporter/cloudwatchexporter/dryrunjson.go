// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter"

import "encoding/json"

type dryRunRequest struct {
	Namespace  string        `json:"Namespace"`
	MetricData []dryRunDatum `json:"MetricData"`
}

type dryRunDatum struct {
	MetricName        string            `json:"MetricName"`
	Dimensions        []dryRunDimension `json:"Dimensions,omitempty"`
	Timestamp         string            `json:"Timestamp"`
	Value             *float64          `json:"Value,omitempty"`
	StatisticValues   *dryRunStatistics `json:"StatisticValues,omitempty"`
	Values            []float64         `json:"Values,omitempty"`
	Counts            []float64         `json:"Counts,omitempty"`
	Unit              string            `json:"Unit,omitempty"`
	StorageResolution int32             `json:"StorageResolution"`
}

type dryRunDimension struct {
	Name  string `json:"Name"`
	Value string `json:"Value"`
}

type dryRunStatistics struct {
	SampleCount float64 `json:"SampleCount"`
	Sum         float64 `json:"Sum"`
	Minimum     float64 `json:"Minimum"`
	Maximum     float64 `json:"Maximum"`
}

// dryRunJSON is one request as the dry run prints it, without the newline.
func dryRunJSON(namespace string, datums []datum) ([]byte, error) {
	req := dryRunRequest{Namespace: namespace, MetricData: make([]dryRunDatum, len(datums))}
	for i := range datums {
		d := &datums[i]
		out := &req.MetricData[i]
		out.MetricName = d.name
		out.Timestamp = d.timestamp.AsTime().UTC().Format("2006-01-02T15:04:05.000Z") // CloudWatch keeps milliseconds
		out.Unit = string(d.unit.standard())
		out.StorageResolution = d.resolution
		for _, dim := range d.dims {
			out.Dimensions = append(out.Dimensions, dryRunDimension{Name: dim.name, Value: dim.value})
		}
		switch d.kind {
		case kindValue:
			out.Value = &d.value
		case kindStatistics:
			st := d.stats()
			out.StatisticValues = &dryRunStatistics{
				SampleCount: st.sampleCount, Sum: st.sum, Minimum: st.min, Maximum: st.max,
			}
		case kindValues:
			out.Values, out.Counts = d.values(), d.counts()
		}
	}
	return json.Marshal(&req)
}
