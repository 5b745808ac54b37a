// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package prometheustest runs Debian's Prometheus server for the tests that
// drive the built binary into it (scrape and remote write) and reads it
// back over its HTTP API.
package prometheustest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
)

// Server is Debian's prometheus binary on a free loopback port
// the caller picked, with its own temporary TSDB: it scrapes target (when
// set) every second and accepts remote write at /api/v1/write.
type Server struct {
	URL string
}

// Start runs the server on 127.0.0.1:port, scraping scrapeTarget every
// second when it is set, and stops it when the test ends.
func Start(t testing.TB, port int, scrapeTarget string) *Server {
	t.Helper()
	// No out-of-order window: like a default Prometheus, the store refuses
	// a sample older than the newest of its series (HTTP 400).
	cfg := "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
	if scrapeTarget != "" {
		cfg += fmt.Sprintf("scrape_configs:\n  - job_name: sidecar\n    honor_labels: true\n    static_configs:\n      - targets: [%q]\n", scrapeTarget)
	}
	return StartWithConfig(t, port, cfg)
}

// StartWithConfig runs the server on 127.0.0.1:port with config (its
// prometheus.yml), a temporary TSDB and the remote-write receiver, and
// stops it when the test ends.
func StartWithConfig(t testing.TB, port int, config string) *Server {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	require.NoError(t, err, "the Prometheus server is not installed: run `make deps` (Debian package prometheus)")
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o600))
	proc, err := binarytest.Start([]string{bin,
		"--config.file=" + filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path=" + filepath.Join(dir, "data"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port),
		"--web.enable-remote-write-receiver",
		"--log.level=warn"}, os.Environ(), 0)
	require.NoError(t, err)
	t.Cleanup(func() {
		if _, err := proc.Stop(30 * time.Second); err != nil {
			t.Logf("prometheus: %v", err)
		}
		if t.Failed() {
			t.Logf("prometheus output:\n%s", proc.Output.String())
		}
	})
	p := &Server{URL: fmt.Sprintf("http://127.0.0.1:%d", port)}
	require.NoError(t, proc.AwaitHealthy(p.URL+"/-/ready", 60*time.Second), "prometheus did not become ready")
	return p
}

// Sample is one series of an instant query's answer.
type Sample struct {
	Metric map[string]string
	Value  float64
}

// Query runs an instant query.
func (p *Server) Query(promql string) ([]Sample, error) {
	var result []struct {
		Metric map[string]string `json:"metric"`
		Value  [2]any            `json:"value"`
	}
	if err := p.get(promql, &result); err != nil {
		return nil, err
	}
	out := make([]Sample, 0, len(result))
	for _, r := range result {
		v, err := sampleValue(r.Value)
		if err != nil {
			return nil, err
		}
		out = append(out, Sample{Metric: r.Metric, Value: v})
	}
	return out, nil
}

// get runs an instant query and decodes its data's result into result.
func (p *Server) get(promql string, result any) error {
	resp, err := http.Get(p.URL + "/api/v1/query?query=" + url.QueryEscape(promql))
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return err
	}
	if body.Status != "success" {
		return fmt.Errorf("query %s: %s", promql, body.Error)
	}
	return json.Unmarshal(body.Data.Result, result)
}

// sampleValue reads a [timestamp, "value"] pair of the HTTP API.
func sampleValue(pair [2]any) (float64, error) {
	var v float64
	s, _ := pair[1].(string)
	_, err := fmt.Sscan(s, &v)
	return v, err
}

// Series is one series of a range selector's answer: its samples'
// values in time order.
type Series struct {
	Metric map[string]string
	Values []float64
}

// Samples runs an instant query of a range selector (e.g. `m[1h]`) and
// returns every stored sample of each series.
func (p *Server) Samples(rangeSelector string) ([]Series, error) {
	var result []struct {
		Metric map[string]string `json:"metric"`
		Values [][2]any          `json:"values"`
	}
	if err := p.get(rangeSelector, &result); err != nil {
		return nil, err
	}
	out := make([]Series, 0, len(result))
	for _, r := range result {
		sr := Series{Metric: r.Metric}
		for _, pair := range r.Values {
			v, err := sampleValue(pair)
			if err != nil {
				return nil, err
			}
			sr.Values = append(sr.Values, v)
		}
		out = append(out, sr)
	}
	return out, nil
}

// ByLabel runs a `sum by (label)` query and returns label value -> sum.
func (p *Server) ByLabel(promql, label string) (map[string]float64, error) {
	samples, err := p.Query(promql)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, s := range samples {
		out[s.Metric[label]] += s.Value
	}
	return out, nil
}

// Single is the value of a query that answers one series; ok is false
// when it answers none.
func (p *Server) Single(t testing.TB, promql string) (float64, bool) {
	t.Helper()
	samples, err := p.Query(promql)
	if err != nil || len(samples) == 0 {
		return 0, false
	}
	require.Len(t, samples, 1, promql)
	return samples[0].Value, true
}
