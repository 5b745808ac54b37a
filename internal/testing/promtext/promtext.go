// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package promtext reads a collector's own telemetry, the Prometheus text
// exposition of its :8888/metrics endpoint, for the tests and the load
// harness that drive the built binary. Parsing is expfmt's.
package promtext

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Families are the metric families of one scrape, by name.
type Families map[string]*dto.MetricFamily

// Parse reads a text exposition.
func Parse(r io.Reader) (Families, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(r)
}

// Scrape fetches and parses http://addr/metrics.
func Scrape(addr string) (Families, error) {
	client := http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: %s", addr, resp.Status)
	}
	return Parse(resp.Body)
}

// Sum adds the values of the counter, gauge or untyped metric name (or
// name_total, the suffix Prometheus gives counters) over the series whose
// labels include want. ok is false when no series matched.
func (f Families) Sum(name string, want map[string]string) (sum float64, ok bool) {
	for _, n := range []string{name, name + "_total"} {
		fam := f[n]
		if fam == nil {
			continue
		}
		for _, m := range fam.GetMetric() {
			if !hasLabels(m, want) {
				continue
			}
			switch {
			case m.Counter != nil:
				sum += m.Counter.GetValue()
			case m.Gauge != nil:
				sum += m.Gauge.GetValue()
			case m.Untyped != nil:
				sum += m.Untyped.GetValue()
			default:
				continue
			}
			ok = true
		}
	}
	return sum, ok
}

// Names lists the metric families, sorted, for failure messages.
func (f Families) Names() []string {
	names := make([]string, 0, len(f))
	for n := range f {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	for k, v := range want {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == k {
				found = l.GetValue() == v
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
