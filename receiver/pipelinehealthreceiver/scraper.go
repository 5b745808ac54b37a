// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package pipelinehealthreceiver // import "github.com/gpubuild/otelcol-gpubuild/receiver/pipelinehealthreceiver"

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// resourceLabels are target_info's labels that name the collector's
// resource attributes (the pull endpoint writes dots as underscores).
var resourceLabels = map[string]string{
	"service_name":        "service.name",
	"service_instance_id": "service.instance.id",
	"service_version":     "service.version",
}

const maxBody = 4 << 20

type endpointScraper struct {
	cfg    *Config
	client *http.Client
	// url is cfg.URL asking only for the kept families (readURL).
	url string
	// keep is cfg.MetricNames as a set; nil keeps every counter and gauge.
	keep map[string]bool
	// self is the receiver's component id: the points the Collector counts
	// about this receiver (its scrapes, its accepted and refused points)
	// say nothing about the data and are left out.
	self string
	// last is each counter series' value at the previous read, so the
	// next read sends the difference; a series not seen before starts
	// from zero (a loss counter appears with its first loss).
	last     map[string]float64
	lastTime time.Time
}

func newEndpointScraper(cfg *Config, self string) *endpointScraper {
	// One read a minute: no idle connection (and its buffers) kept between.
	// No gzip: the endpoint is the process's own, over loopback, where
	// compressing and decompressing the text would only cost CPU.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, DisableCompression: true}}
	var keep map[string]bool
	if len(cfg.MetricNames) > 0 {
		keep = make(map[string]bool, len(cfg.MetricNames))
		for _, name := range cfg.MetricNames {
			keep[name] = true
		}
	}
	return &endpointScraper{cfg: cfg, client: client, url: readURL(cfg.URL, cfg.MetricNames), keep: keep, self: self, last: map[string]float64{}, lastTime: time.Now()}
}

// readURL is raw asking the endpoint for the named families and
// target_info (the resource) only, with name[] parameters: the Collector's
// endpoint (client_golang's promhttp) then encodes only those families
// (the shipped thirteen of the sidecar's thirty under load), and a read
// parses only them. An endpoint that ignores the parameters sends
// everything, and convert keeps the named families all the same. No
// names: raw.
func readURL(raw string, names []string) string {
	u, err := url.Parse(raw)
	if len(names) == 0 || err != nil {
		return raw
	}
	q := u.Query()
	for _, name := range append([]string{"target_info"}, names...) {
		q.Add("name[]", name)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

func (s *endpointScraper) scrape(ctx context.Context) (pmetric.Metrics, error) {
	families, err := s.read(ctx)
	if err != nil {
		return pmetric.NewMetrics(), err
	}
	now := time.Now()
	md := s.convert(families, s.lastTime, now)
	s.lastTime = now
	return md, nil
}

func (s *endpointScraper) read(ctx context.Context) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, http.NoBody)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered %s", s.cfg.URL, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(io.LimitReader(resp.Body, maxBody))
}

// convert turns the families into one resource's metrics: counters as
// deltas over (from, to], gauges as they are; other types, the names not
// kept and the points about the receiver itself are left out, and so is a
// metric left without points. Nothing kept: no resource either.
func (s *endpointScraper) convert(families map[string]*dto.MetricFamily, from, to time.Time) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	if ti := families["target_info"]; ti != nil && len(ti.GetMetric()) > 0 {
		for _, l := range ti.GetMetric()[0].GetLabel() {
			if name, ok := resourceLabels[l.GetName()]; ok {
				rm.Resource().Attributes().PutStr(name, l.GetValue())
			}
		}
	}
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName("github.com/gpubuild/otelcol-gpubuild/receiver/pipelinehealthreceiver")
	start, ts := pcommon.NewTimestampFromTime(from), pcommon.NewTimestampFromTime(to)
	seen := make(map[string]bool, len(s.last))
	names := make([]string, 0, len(families))
	for name := range families {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		f := families[name]
		if name == "target_info" || len(f.GetMetric()) == 0 || (s.keep != nil && !s.keep[name]) {
			continue
		}
		m := pmetric.NewMetric()
		var points pmetric.NumberDataPointSlice
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			sum := m.SetEmptySum()
			sum.SetIsMonotonic(true)
			sum.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
			points = sum.DataPoints()
		case dto.MetricType_GAUGE:
			points = m.SetEmptyGauge().DataPoints()
		default:
			continue
		}
		for _, pm := range f.GetMetric() {
			if s.aboutSelf(pm) {
				continue
			}
			dp := points.AppendEmpty()
			dp.SetTimestamp(ts)
			key := name
			for _, l := range pm.GetLabel() {
				if strings.HasPrefix(l.GetName(), "otel_scope_") || l.GetValue() == "" {
					continue
				}
				dp.Attributes().PutStr(l.GetName(), l.GetValue())
				key += "\x00" + l.GetName() + "=" + l.GetValue()
			}
			if f.GetType() == dto.MetricType_GAUGE {
				dp.SetDoubleValue(pm.GetGauge().GetValue())
				continue
			}
			v := pm.GetCounter().GetValue()
			delta := v - s.last[key]
			if delta < 0 { // the counter restarted
				delta = v
			}
			s.last[key], seen[key] = v, true
			dp.SetStartTimestamp(start)
			dp.SetDoubleValue(delta)
		}
		if points.Len() > 0 {
			m.SetName(name)
			m.SetDescription(f.GetHelp())
			m.MoveTo(sm.Metrics().AppendEmpty())
		}
	}
	for key := range s.last {
		if !seen[key] {
			delete(s.last, key)
		}
	}
	if sm.Metrics().Len() == 0 {
		return pmetric.NewMetrics()
	}
	return md
}

// aboutSelf says whether a point is one the Collector counts about this
// receiver (its `receiver` label is the receiver's id).
func (s *endpointScraper) aboutSelf(pm *dto.Metric) bool {
	for _, l := range pm.GetLabel() {
		if l.GetName() == "receiver" {
			return l.GetValue() == s.self
		}
	}
	return false
}
