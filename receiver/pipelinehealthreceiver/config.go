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
	// Endpoint is the URL of the collector's Prometheus pull endpoint,
	// e.g. http://127.0.0.1:8888/metrics.
	Endpoint string `mapstructure:"endpoint"`
}

func createDefaultConfig() *Config {
	controller := scraperhelper.NewDefaultControllerConfig()
	controller.CollectionInterval = time.Minute
	controller.Timeout = 5 * time.Second
	return &Config{ControllerConfig: controller}
}

// Validate checks the endpoint.
func (c *Config) Validate() error {
	if c.Endpoint == "" {
		return errors.New("endpoint: must be set (the collector's pull endpoint, e.g. http://127.0.0.1:8888/metrics)")
	}
	u, err := url.Parse(c.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("endpoint: %q is not an http(s) URL", c.Endpoint)
	}
	if c.CollectionInterval <= 0 {
		return errors.New("collection_interval: must be positive")
	}
	return nil
}
