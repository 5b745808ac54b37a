// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package intervalmergeprocessor // import "github.com/gpubuild/otelcol-gpubuild/processor/intervalmergeprocessor"

import (
	"errors"
	"fmt"
	"time"
)

// Config of the intervalmerge processor.
type Config struct {
	// Interval is how long data is merged before it is handed on. A request
	// is acknowledged only then, so the senders' timeout must exceed it.
	Interval time.Duration `mapstructure:"interval"`
	// DropResourceAttributes are the resource attributes that tell workers
	// apart; they are removed from summable (delta sum and delta histogram)
	// metrics so that every worker's series of the same name, unit and
	// attributes merge.
	DropResourceAttributes []string `mapstructure:"drop_resource_attributes"`
	// KeepPerWorker names summable metrics that stay per worker anyway.
	// Gauges, cumulative sums, exponential histograms and summaries always
	// stay per worker.
	KeepPerWorker []string `mapstructure:"keep_per_worker"`
}

func createDefaultConfig() *Config {
	return &Config{
		Interval: 60 * time.Second,
		DropResourceAttributes: []string{
			"service.instance.id", "host.name", "host.id", "host.ip",
			"k8s.pod.name", "k8s.pod.uid", "k8s.pod.ip", "container.id", "process.pid",
		},
	}
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	var errs []error
	if c.Interval <= 0 {
		errs = append(errs, fmt.Errorf("interval: must be positive, got %v", c.Interval))
	}
	for i, a := range c.DropResourceAttributes {
		if a == "" {
			errs = append(errs, fmt.Errorf("drop_resource_attributes[%d]: empty attribute name", i))
		}
	}
	for i, n := range c.KeepPerWorker {
		if n == "" {
			errs = append(errs, fmt.Errorf("keep_per_worker[%d]: empty metric name", i))
		}
	}
	return errors.Join(errs...)
}
