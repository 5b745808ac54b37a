// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"fmt"
	"maps"
	"strconv"
	"strings"
	"testing"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/prometheustest"
)

// The JavaScript service running throughout while its sidecar, sending to
// CloudWatch and to a Prometheus server scraping it
// (GPUBUILD_DESTINATIONS=cloudwatch,prometheus), is stopped with SIGTERM
// and later killed with kill -9, a wave of builds and requests before each
// restart and after the last: Prometheus' last value of build.jobs by
// result and of api.requests is the truth of every wave (the derived series
// continue across both restarts: before the persisted conversion they
// started again from zero), and so is the service's own request count
// (its cumulative histogram, passed through); CloudWatch is exact too.
func TestLifecyclePrometheusAcrossRestarts(t *testing.T) {
	const name = "lifecycle-prometheus"
	e := newEnv(t)
	ports := binarytest.FreePorts(t, 2)
	target := fmt.Sprintf("127.0.0.1:%d", ports[0])
	prom := prometheustest.Start(t, ports[1], target)
	destinations := []string{"GPUBUILD_DESTINATIONS=cloudwatch,prometheus", "GPUBUILD_PROMETHEUS_PORT=" + strconv.Itoa(ports[0])}
	start := func() *collector { return e.startCollectorOn(binary(t), e.config, destinations...) }

	col := start()
	svc := e.startService(name, acrossRestarts)
	tr := newTally()
	svc.wave(tr, 15)
	e.awaitSDKDelivered(name, tr)
	col.stop()

	col = start()
	svc.wave(tr, 15)
	e.awaitSDKDelivered(name, tr)
	col.kill9()

	start()
	svc.wave(tr, 15)
	svc.checkServiceTruth(tr)
	svc.stop()
	e.awaitExact(name, tr, scenarioDeadline)

	selector := fmt.Sprintf(`{service_name=%q}`, name)
	read := func() (jobs, requests map[string]float64, histogram float64, err error) {
		if jobs, err = prom.ByLabel(`sum by (build_result) (last_over_time(build_jobs_total`+selector+`[1h]))`, "build_result"); err != nil {
			return
		}
		if requests, err = prom.ByLabel(`sum by (http_response_status_class) (last_over_time(api_requests_total`+selector+`[1h]))`, "http_response_status_class"); err != nil {
			return
		}
		h, err := prom.Query(`sum(last_over_time(http_server_request_duration_seconds_count` + selector + `[1h]))`)
		if err == nil && len(h) == 1 {
			histogram = h[0].Value
		}
		return jobs, requests, histogram, err
	}
	wantJobs, wantRequests := map[string]float64{}, map[string]float64{}
	for result, n := range tr.Jobs {
		wantJobs[result] = float64(n)
	}
	var wantHistogram float64
	for key, n := range tr.Requests {
		class := key[strings.LastIndex(key, " ")+1:]
		wantRequests[class] += float64(n)
		wantHistogram += float64(n)
	}
	ok := await(t, scenarioDeadline, "Prometheus == truth", func() (bool, string) {
		jobs, requests, histogram, err := read()
		if err != nil {
			return false, err.Error()
		}
		return maps.Equal(jobs, wantJobs) && maps.Equal(requests, wantRequests) && histogram == wantHistogram,
			fmt.Sprintf("build_jobs_total %v (truth %v), api_requests_total %v (truth %v), request count %v (truth %v)",
				jobs, wantJobs, requests, wantRequests, histogram, wantHistogram)
	})
	if !ok {
		t.Fatal("Prometheus did not reach the truth")
	}
}
