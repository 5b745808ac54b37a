// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter"

import (
	"context"
	"io"
	"sync"

	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/translate"
)

// dryRunPutter writes each request, instead of sending it, as one line of
// JSON in the shape of the PutMetricData request (the shape
// `aws cloudwatch put-metric-data --cli-input-json` reads).
type dryRunPutter struct {
	mu sync.Mutex
	w  io.Writer
}

func (p *dryRunPutter) put(_ context.Context, namespace string, datums []translate.Datum) error {
	line, err := translate.DryRunJSON(namespace, datums)
	if err != nil {
		return err
	}
	line = append(line, '\n')
	p.mu.Lock()
	defer p.mu.Unlock()
	_, err = p.w.Write(line)
	return err
}
