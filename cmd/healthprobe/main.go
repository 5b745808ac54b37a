// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Command healthprobe asks the collector's health_check extension whether the
// collector is ready. The runtime image has no shell or curl, so Docker's
// HEALTHCHECK and Kubernetes exec probes run this static binary instead; it
// lets the health endpoint stay bound to 127.0.0.1.
package main

import (
	"fmt"
	"net/http"
	"os"
	"time"
)

func main() {
	url := "http://127.0.0.1:" + envOr("GPUBUILD_HEALTH_PORT", "13133") + "/"
	if len(os.Args) > 1 {
		url = os.Args[1]
	}
	if err := probe(url, 3*time.Second); err != nil {
		fmt.Fprintln(os.Stderr, "unhealthy:", err)
		os.Exit(1)
	}
}

func probe(url string, timeout time.Duration) error {
	client := &http.Client{Timeout: timeout}
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %s", url, resp.Status)
	}
	return nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
