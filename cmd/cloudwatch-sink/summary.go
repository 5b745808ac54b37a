// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
)

// breakdown names the dimensions a summary row is split by: the ones a
// reader of the demo compares with buildsim's ground truth.
var breakdown = []string{"build.stage", "build.result", "http.response.status_class"}

// summary totals what landed per metric name and breakdown dimensions:
// samples (what CloudWatch's SampleCount would say) and their sum.
type summary struct {
	mu   sync.Mutex
	rows map[string]*row
}

type row struct {
	metric, labels, unit string
	datums               int
	samples, sum         float64
}

func newSummary() *summary { return &summary{rows: map[string]*row{}} }

func (s *summary) add(d cloudwatchtest.Datum) {
	var labels []string
	for _, k := range breakdown {
		if v, ok := d.Dimensions[k]; ok {
			labels = append(labels, k+"="+v)
		}
	}
	key := d.MetricName + "\x00" + strings.Join(labels, ",")
	samples, sum := datumTotals(d)

	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rows[key]
	if r == nil {
		r = &row{metric: d.MetricName, labels: strings.Join(labels, " "), unit: d.Unit}
		s.rows[key] = r
	}
	r.datums++
	r.samples += samples
	r.sum += sum
}

// datumTotals returns a datum's sample count and sum, whichever of Value,
// StatisticValues or Values/Counts it carries.
func datumTotals(d cloudwatchtest.Datum) (samples, sum float64) {
	switch {
	case d.Value != nil:
		return 1, *d.Value
	case d.Statistics != nil:
		return d.Statistics.SampleCount, d.Statistics.Sum
	default:
		for i, v := range d.Values {
			c := 1.0
			if i < len(d.Counts) {
				c = d.Counts[i]
			}
			samples += c
			sum += v * c
		}
		return samples, sum
	}
}

func (s *summary) print(w io.Writer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, 0, len(s.rows))
	for k := range s.rows {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "METRIC\tDIMENSIONS\tUNIT\tDATUMS\tSAMPLES\tSUM")
	for _, k := range keys {
		r := s.rows[k]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%g\t%.6g\n", r.metric, r.labels, r.unit, r.datums, r.samples, r.sum)
	}
	_ = tw.Flush()
}
