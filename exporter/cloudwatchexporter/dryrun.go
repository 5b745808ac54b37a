// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter"

import (
	"context"
	"encoding/json"
	"io"
	"sync"
)

// dryRunPutter writes each request, instead of sending it, as one line of
// JSON in the shape of the PutMetricData request (the shape
// `aws cloudwatch put-metric-data --cli-input-json` reads).
type dryRunPutter struct {
	mu sync.Mutex
	w  io.Writer
}

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

func (p *dryRunPutter) put(_ context.Context, namespace string, datums []datum) error {
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
	line, err := json.Marshal(&req)
	if err != nil {
		return err
	}
	line = append(line, '\n')
	p.mu.Lock()
	defer p.mu.Unlock()
	_, err = p.w.Write(line)
	return err
}
