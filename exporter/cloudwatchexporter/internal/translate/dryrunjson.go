// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package translate // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/translate"

import "encoding/json"

// DryRunRequest is a PutMetricData request as the dry run prints it (the
// shape `aws cloudwatch put-metric-data --cli-input-json` reads).
type DryRunRequest struct {
	Namespace  string        `json:"Namespace"`
	MetricData []DryRunDatum `json:"MetricData"`
}

// DryRunDatum is one MetricDatum of a DryRunRequest.
type DryRunDatum struct {
	MetricName        string            `json:"MetricName"`
	Dimensions        []DryRunDimension `json:"Dimensions,omitempty"`
	Timestamp         string            `json:"Timestamp"`
	Value             *float64          `json:"Value,omitempty"`
	StatisticValues   *DryRunStatistics `json:"StatisticValues,omitempty"`
	Values            []float64         `json:"Values,omitempty"`
	Counts            []float64         `json:"Counts,omitempty"`
	Unit              string            `json:"Unit,omitempty"`
	StorageResolution int32             `json:"StorageResolution"`
}

// DryRunDimension is one dimension of a DryRunDatum.
type DryRunDimension struct {
	Name  string `json:"Name"`
	Value string `json:"Value"`
}

// DryRunStatistics is a DryRunDatum's StatisticValues.
type DryRunStatistics struct {
	SampleCount float64 `json:"SampleCount"`
	Sum         float64 `json:"Sum"`
	Minimum     float64 `json:"Minimum"`
	Maximum     float64 `json:"Maximum"`
}

// DryRunJSON is one request as the dry run prints it, without the newline.
func DryRunJSON(namespace string, datums []Datum) ([]byte, error) {
	req := DryRunRequest{Namespace: namespace, MetricData: make([]DryRunDatum, len(datums))}
	for i := range datums {
		d := &datums[i]
		out := &req.MetricData[i]
		out.MetricName = d.Name
		out.Timestamp = d.Timestamp.AsTime().UTC().Format("2006-01-02T15:04:05.000Z") // CloudWatch keeps milliseconds
		out.Unit = string(d.Unit.standard())
		out.StorageResolution = d.Resolution
		for _, dim := range d.Dims {
			out.Dimensions = append(out.Dimensions, DryRunDimension(dim))
		}
		switch d.Kind {
		case KindValue:
			out.Value = &d.Value
		case KindStatistics:
			st := d.Stats()
			out.StatisticValues = &DryRunStatistics{
				SampleCount: st.SampleCount, Sum: st.Sum, Minimum: st.Min, Maximum: st.Max,
			}
		case KindValues:
			out.Values, out.Counts = d.Values(), d.Counts()
		}
	}
	return json.Marshal(&req)
}
