// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package pipelinehealthreceiver // import "github.com/gpubuild/otelcol-gpubuild/receiver/pipelinehealthreceiver"

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"go.opentelemetry.io/collector/scraper/scraperhelper"
)

// Config is the pull endpoint to read and how often.
type Config struct {
	scraperhelper.ControllerConfig `mapstructure:",squash"`
	// URL is the collector's Prometheus pull endpoint to read, e.g.
	// http://127.0.0.1:8888/metrics (a client URL, not a listener).
	URL string `mapstructure:"url"`
}

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
	return nil
}
