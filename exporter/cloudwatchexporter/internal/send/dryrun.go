// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package send // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/send"

import (
	"context"
	"io"
	"sync"

	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/translate"
)

// DryRunPutter writes each request, instead of sending it, as one line of
// JSON in the shape of the PutMetricData request (the shape
// `aws cloudwatch put-metric-data --cli-input-json` reads).
type DryRunPutter struct {
	mu sync.Mutex
	W  io.Writer
}

// Put prints one request as a line of JSON.
func (p *DryRunPutter) Put(_ context.Context, namespace string, datums []translate.Datum) error {
	line, err := translate.DryRunJSON(namespace, datums)
	if err != nil {
		return err
	}
	line = append(line, '\n')
	p.mu.Lock()
	defer p.mu.Unlock()
	_, err = p.W.Write(line)
	return err
}
