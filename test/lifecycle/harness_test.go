// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package lifecycle drives a real Node.js build service (test/jsservice,
// the OpenTelemetry JS SDK at its defaults) against the built collector and
// the local CloudWatch endpoint, stops, kills, starts late and upgrades the
// collector or restarts the service, and compares what landed with the
// requests the test sent, exactly.
package lifecycle

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
)

// env is one test's world: the CloudWatch endpoint, the collector's ports
// and state directory (kept across the collector's restarts).
type env struct {
	t        *testing.T
	cw       *cloudwatchtest.Server
	grpc     int
	http     int
	health   int
	stateDir string
	config   string
	// previousConfig is the same configuration without the keys the
	// previous release does not know (the derivation state).
	previousConfig string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	cw, err := cloudwatchtest.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = cw.Close() })
	ports := binarytest.FreePorts(t, 3)
	e := &env{t: t, cw: cw, grpc: ports[0], http: ports[1],
		health: ports[2], stateDir: t.TempDir()}
	tmpl, err := template.ParseFiles(filepath.Join("testdata", "collector.yaml.tmpl"))
	require.NoError(t, err)
	render := func(persistDerivation bool) string {
		var b bytes.Buffer
		require.NoError(t, tmpl.Execute(&b, map[string]any{
			"Health": e.health, "GRPC": e.grpc, "HTTP": e.http, "StateDir": e.stateDir, "Endpoint": cw.Endpoint(),
			"PersistDerivation": persistDerivation,
		}))
		path := filepath.Join(t.TempDir(), "config.yaml")
		require.NoError(t, os.WriteFile(path, b.Bytes(), 0o600))
		return path
	}
	e.config, e.previousConfig = render(true), render(false)
	return e
}

// collector is one run of a collector binary.
type collector struct {
	t *testing.T
	*binarytest.Process
}

// startCollector runs bin on the env's config and waits until it is healthy.
func (e *env) startCollector(bin string) *collector {
	e.t.Helper()
	return e.startCollectorOn(bin, e.config)
}

// startPreviousRelease runs the previous release's binary on the same
// directories and ports, with the configuration it understands.
func (e *env) startPreviousRelease(bin string) *collector {
	e.t.Helper()
	return e.startCollectorOn(bin, e.previousConfig)
}

// startCollectorOn runs bin on config, with extraEnv (GPUBUILD_* settings)
// added to the environment.
func (e *env) startCollectorOn(bin, config string, extraEnv ...string) *collector {
	t := e.t
	t.Helper()
	p := binarytest.StartBinaryAt(t, bin, append(append(binarytest.EnvWithout("AWS_", "GPUBUILD_", "OTEL_"),
		"AWS_EC2_METADATA_DISABLED=true", "AWS_ACCESS_KEY_ID=AKIDLIFECYCLE000001",
		"AWS_SECRET_ACCESS_KEY=lifecycleSecret", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null"),
		extraEnv...),
		"--config", config)
	require.NoError(t, p.AwaitHealthy(fmt.Sprintf("http://127.0.0.1:%d/", e.health), 60*time.Second))
	t.Cleanup(func() {
		if t.Failed() {
			// What each process restored at start, which the output's tail
			// may no longer reach back to.
			for _, line := range strings.Split(p.Output.String(), "\n") {
				if strings.Contains(line, "Restored") {
					t.Logf("%s: %s", filepath.Base(bin), line)
				}
			}
		}
	})
	return &collector{t: t, Process: p}
}

// stop sends SIGTERM and waits for a clean exit.
func (c *collector) stop() {
	c.t.Helper()
	_, err := c.Stop(60 * time.Second)
	require.NoError(c.t, err, "collector exit after SIGTERM:\n%s", binarytest.Tail(c.Output.String(), 4000))
}

// kill9 kills the collector without warning, as the OOM killer would.
func (c *collector) kill9() { c.Kill9() }

// await polls cond until it holds or the deadline passes, and logs cond's
// last state when it never did; the machine is slow under load, so
// deadlines are generous and nothing sleeps in place of a condition.
func await(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) bool {
	t.Helper()
	var last string
	ok := binarytest.Eventually(timeout, func() bool {
		var done bool
		done, last = cond()
		return done
	})
	if !ok {
		t.Logf("%s: not reached after %v: %s", what, timeout, last)
	}
	return ok
}

// binary is the collector under test (bin/otelcol-gpubuild).
func binary(t *testing.T) string { return binarytest.Binary(t) }

// repoPath is a path inside the checkout.
func repoPath(rel string) string { return filepath.Join(binarytest.RepoRoot(), rel) }

// landed sums what reached the CloudWatch endpoint for one service.
type landed struct {
	Jobs      map[string]float64 // build.jobs by build.result
	Requests  map[string]float64 // api.requests by "route METHOD class"
	Histogram map[string]float64 // http.server.request.duration sample count by "route METHOD class"
}

func (e *env) landed(serviceName string) landed {
	l := landed{Jobs: map[string]float64{}, Requests: map[string]float64{}, Histogram: map[string]float64{}}
	for _, d := range e.cw.Datums() {
		if d.Dimensions["service.name"] != serviceName {
			continue
		}
		switch d.MetricName {
		case "build.jobs":
			l.Jobs[d.Dimensions["build.result"]] += sumValues(d)
		case "api.requests":
			l.Requests[requestKey(d.Dimensions["http.route"], d.Dimensions["http.request.method"], d.Dimensions["http.response.status_class"])] += sumValues(d)
		case "http.server.request.duration":
			class := d.Dimensions["http.response.status_code"]
			if class != "" {
				class = class[:1] + "xx"
			}
			l.Histogram[requestKey(d.Dimensions["http.route"], d.Dimensions["http.request.method"], class)] += sampleCount(d)
		}
	}
	return l
}

func sumValues(d cloudwatchtest.Datum) float64 {
	switch {
	case d.Statistics != nil:
		return d.Statistics.Sum
	case len(d.Values) > 0:
		var s float64
		for i, v := range d.Values {
			c := 1.0
			if i < len(d.Counts) {
				c = d.Counts[i]
			}
			s += v * c
		}
		return s
	case d.Value != nil:
		return *d.Value
	}
	return 0
}

func sampleCount(d cloudwatchtest.Datum) float64 {
	switch {
	case d.Statistics != nil:
		return d.Statistics.SampleCount
	case len(d.Values) > 0:
		var s float64
		for i := range d.Values {
			c := 1.0
			if i < len(d.Counts) {
				c = d.Counts[i]
			}
			s += c
		}
		return s
	case d.Value != nil:
		return 1
	}
	return 0
}

func requestKey(route, method, class string) string { return route + " " + method + " " + class }

// diff lists the keys where got and want differ, sorted.
func diff(what string, got map[string]float64, want map[string]int) []string {
	keys := map[string]bool{}
	for k := range got {
		keys[k] = true
	}
	for k := range want {
		keys[k] = true
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if got[k] != float64(want[k]) {
			out = append(out, fmt.Sprintf("%s{%s}: landed %v, truth %d", what, k, got[k], want[k]))
		}
	}
	return out
}

func total[V int | float64](m map[string]V) V {
	var s V
	for _, v := range m {
		s += v
	}
	return s
}

// mismatches compares what landed with the truth: build.jobs by result,
// api.requests by route/method/status class, and the pass-through
// histogram's counts by the same keys.
func mismatches(l landed, tr *tally) []string {
	out := diff("build.jobs", l.Jobs, tr.Jobs)
	out = append(out, diff("api.requests", l.Requests, tr.apiRequests())...)
	return append(out, diffWithin("http.server.request.duration count", l.Histogram, tr.Requests, tr.Resendable)...)
}

// diffWithin lists the keys where got is below want or above want plus extra.
func diffWithin(what string, got map[string]float64, want, extra map[string]int) []string {
	if len(extra) == 0 {
		return diff(what, got, want)
	}
	var out []string
	keys := map[string]bool{}
	for k := range got {
		keys[k] = true
	}
	for k := range want {
		keys[k] = true
	}
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if g, w := got[k], float64(want[k]); g < w || g > w+float64(extra[k]) {
			out = append(out, fmt.Sprintf("%s{%s}: landed %v, truth %d (up to %d more sent again after a kill)", what, k, g, want[k], extra[k]))
		}
	}
	return out
}

// awaitSDKDelivered waits until the service's cumulative request
// histograms that landed count every request the test made: the SDK's
// latest metric export reached the collector, so its connection is up.
func (e *env) awaitSDKDelivered(serviceName string, tr *tally) {
	e.t.Helper()
	ok := await(e.t, scenarioDeadline, "the service's metric export delivered", func() (bool, string) {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		d := diff("http.server.request.duration count", e.landed(serviceName).Histogram, tr.Requests)
		return len(d) == 0, strings.Join(d, "; ")
	})
	require.True(e.t, ok, "the service's SDK never delivered through the collector")
}

// awaitExact waits until what landed for the service equals the truth and
// fails the test with the differences (and the totals) if it never does.
// Once equal it waits a further flush to see nothing more lands.
func (e *env) awaitExact(serviceName string, tr *tally, timeout time.Duration) {
	t := e.t
	t.Helper()
	ok := await(t, timeout, "landed == truth", func() (bool, string) {
		return len(mismatches(e.landed(serviceName), tr)) == 0, strings.Join(mismatches(e.landed(serviceName), tr), "; ")
	})
	if ok {
		// Anything that would land twice arrives within a few flushes (1 s
		// each) of the rest: give it that chance before calling it exact.
		n := len(e.cw.Requests())
		await(t, 5*time.Second, "three more PutMetricData requests", func() (bool, string) {
			return len(e.cw.Requests()) >= n+3 || len(mismatches(e.landed(serviceName), tr)) > 0, ""
		})
	}
	l := e.landed(serviceName)
	if m := mismatches(l, tr); len(m) > 0 {
		t.Errorf("landed != truth: build.jobs landed %v truth %d; api.requests landed %v truth %d; histogram count landed %v\n  %s",
			total(l.Jobs), total(tr.Jobs), total(l.Requests), total(tr.apiRequests()), total(l.Histogram), strings.Join(m, "\n  "))
	}
}

// writeJSON is a helper for the service's JSON bodies.
func writeJSON(v any) *bytes.Reader {
	b, _ := json.Marshal(v)
	return bytes.NewReader(b)
}
