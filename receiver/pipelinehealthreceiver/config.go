// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package pipelinehealthreceiver // import "github.com/gpubuild/otelcol-gpubuild/receiver/pipelinehealthreceiver"

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"time"

	"go.opentelemetry.io/collector/scraper/scraperhelper"
)

// Config is the pull endpoint to read, how often, and what to keep.
type Config struct {
	scraperhelper.ControllerConfig `mapstructure:",squash"`
	// URL is the collector's Prometheus pull endpoint to read, e.g.
	// http://127.0.0.1:8888/metrics (a client URL, not a listener).
	URL string `mapstructure:"url"`
	// MetricNames are the metrics emitted, by their names on the endpoint;
	// empty emits every counter and gauge. A name not on the endpoint is
	// no error: the Collector shows a loss counter only once it moved.
	MetricNames []string `mapstructure:"metric_names"`
}

// metricName is a Prometheus metric name, as the pull endpoint writes it.
var metricName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)

func createDefaultConfig() *Config {
	controller := scraperhelper.NewDefaultControllerConfig()
	controller.CollectionInterval = time.Minute
	controller.Timeout = 5 * time.Second
	return &Config{ControllerConfig: controller}
}

// Validate checks the endpoint.
func (c *Config) Validate() error {
	if c.URL == "" {
		return errors.New("url: must be set (the collector's pull endpoint, e.g. http://127.0.0.1:8888/metrics)")
	}
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("url: %q is not an http(s) URL", c.URL)
	}
	if c.CollectionInterval <= 0 {
		return errors.New("collection_interval: must be positive")
	}
	seen := make(map[string]bool, len(c.MetricNames))
	for i, name := range c.MetricNames {
		if !metricName.MatchString(name) {
			return fmt.Errorf("metric_names[%d]: %q is not a metric name as the pull endpoint writes it (e.g. otelcol_exporter_queue_size)", i, name)
		}
		if seen[name] {
			return fmt.Errorf("metric_names[%d]: %q is listed twice", i, name)
		}
		seen[name] = true
	}
	return nil
}
