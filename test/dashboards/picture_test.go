// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package dashboards

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
)

// EnvPictureData names the file TestWritePictureData writes: the Grafana
// dashboard's panels over a real run, for scripts/dashboard-picture.sh.
const EnvPictureData = "DASHBOARD_PICTURE_DATA"

type pictureSeries struct {
	Legend string       `json:"legend"`
	Points [][2]float64 `json:"points"` // seconds since the run's start, value
}

type picturePanel struct {
	Title  string          `json:"title"`
	Unit   string          `json:"unit"`
	Series []pictureSeries `json:"series"`
}

// TestWritePictureData is not a check: it generates the data of the
// README's picture (scripts/dashboard-picture.sh sets DASHBOARD_PICTURE_DATA).
// It runs the same sidecar, workload and Prometheus as
// TestDashboardsAgainstRealOutput, for two minutes, and evaluates every
// Grafana panel's queries over the run as Grafana would (30 s rate window).
func TestWritePictureData(t *testing.T) {
	out := os.Getenv(EnvPictureData)
	if out == "" {
		t.Skipf("generator of the README picture: set %s (scripts/dashboard-picture.sh)", EnvPictureData)
	}
	raw, err := os.ReadFile(filepath.Join(binarytest.RepoRoot(), grafanaPath))
	require.NoError(t, err)
	var d struct {
		Panels []struct {
			Title       string `json:"title"`
			Type        string `json:"type"`
			FieldConfig struct {
				Defaults struct {
					Unit string `json:"unit"`
				} `json:"defaults"`
			} `json:"fieldConfig"`
			Targets []struct {
				Expr         string `json:"expr"`
				LegendFormat string `json:"legendFormat"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(raw, &d))

	r := startRun(t, []string{rulesWithoutFor(t)})
	start := time.Now()
	cfg := workload(r.otlpURL)
	cfg.Jobs, cfg.Rate = 240, 2
	r.driveWith(t, cfg)
	time.Sleep(15 * time.Second) // the last timeouts and flushes
	end := time.Now()

	vars := strings.NewReplacer("$__rate_interval", "30s", "${service}", ".*", "$service", ".*", "${host}", ".*", "$host", ".*")
	legendRe := regexp.MustCompile(`\{\{ *([a-zA-Z0-9_]+) *\}\}`)
	var panels []picturePanel
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		pp := picturePanel{Title: p.Title, Unit: p.FieldConfig.Defaults.Unit}
		for _, tg := range p.Targets {
			series, err := r.scrape.queryRange(vars.Replace(tg.Expr), start, end, time.Second)
			require.NoError(t, err)
			for _, s := range series {
				legend := legendRe.ReplaceAllStringFunc(tg.LegendFormat, func(m string) string {
					return s.Metric[legendRe.FindStringSubmatch(m)[1]]
				})
				ps := pictureSeries{Legend: legend}
				for _, v := range s.Values {
					ts, _ := v[0].(float64)
					str, _ := v[1].(string)
					f, err := strconv.ParseFloat(str, 64)
					if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
						continue // a gap in the graph
					}
					ps.Points = append(ps.Points, [2]float64{ts - float64(start.Unix()), f})
				}
				pp.Series = append(pp.Series, ps)
			}
		}
		panels = append(panels, pp)
	}
	b, err := json.MarshalIndent(panels, "", " ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(out, b, 0o600))
}

type promRangeSeries struct {
	Metric map[string]string `json:"metric"`
	Values [][2]any          `json:"values"`
}

func (p *prometheusServer) queryRange(promql string, start, end time.Time, step time.Duration) ([]promRangeSeries, error) {
	q := url.Values{"query": {promql}, "start": {strconv.FormatInt(start.Unix(), 10)}, "end": {strconv.FormatInt(end.Unix(), 10)}, "step": {step.String()}}
	resp, err := http.Get(p.URL + "/api/v1/query_range?" + q.Encode())
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []promRangeSeries `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("query %s: %s", promql, body.Error)
	}
	return body.Data.Result, nil
}
