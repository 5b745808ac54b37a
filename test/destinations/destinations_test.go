// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package destinations drives the built binary with GPUBUILD_DESTINATIONS
// naming every metric store at once, against real or protocol-faithful
// stores on loopback: Debian's Prometheus server (scraping, and receiving
// remote write), an OTLP/HTTP sink, a CloudWatch OTLP endpoint that verifies
// SigV4, and the local PutMetricData endpoint.
package destinations

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/buildsim"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
)

// totals are what one store says about a workload: derived build metrics
// (counts by result, stage runs, API requests) and pass-through SDK metrics
// (a counter's total, a histogram's count).
type totals map[string]float64

func truthTotals(s *buildsim.Summary) totals {
	out := totals{}
	for result, n := range s.Acknowledged.JobsByResult {
		if n > 0 {
			out["build.jobs{"+result+"}"] = float64(n)
		}
	}
	out["build.stage.runs"] = float64(buildsim.Match(s.Acknowledged.StageRuns, nil).Count)
	out["api.requests"] = float64(buildsim.Match(s.Acknowledged.APIRequests, nil).Count)
	out["sdk.counter"] = float64(s.SDKMetrics.Counter.Total)
	out["sdk.histogram.count"] = float64(s.SDKMetrics.Histogram.Count)
	return out
}

// Prometheus names follow the OTLP-to-Prometheus rules: dots become
// underscores, annotations in braces are not units, By becomes _bytes,
// monotonic sums get _total, histograms expose _count.
func prometheusTotals(p *prometheusServer) (totals, error) {
	out := totals{}
	jobs, err := p.ByLabel(`sum by (build_result) (build_jobs_total)`, "build_result")
	if err != nil {
		return nil, err
	}
	for result, v := range jobs {
		out["build.jobs{"+result+"}"] = v
	}
	for key, promql := range map[string]string{
		"build.stage.runs":    `sum(build_stage_runs_total)`,
		"api.requests":        `sum(api_requests_total)`,
		"sdk.counter":         `sum(buildsvc_vectors_indexed_total)`,
		"sdk.histogram.count": `sum(buildsvc_index_size_bytes_count)`,
	} {
		samples, err := p.Query(promql)
		if err != nil {
			return nil, err
		}
		if len(samples) == 1 {
			out[key] = samples[0].Value
		}
	}
	return out, nil
}

func otlpTotals(s *otlpSink, results []string) totals {
	out := totals{}
	for _, r := range results {
		if v := s.cumulativeTotal("build.jobs", map[string]string{"build.result": r}); v > 0 {
			out["build.jobs{"+r+"}"] = v
		}
	}
	out["build.stage.runs"] = s.cumulativeTotal("build.stage.runs", nil)
	out["api.requests"] = s.cumulativeTotal("api.requests", nil)
	out["sdk.counter"] = s.cumulativeTotal(buildsim.CounterName, nil)
	out["sdk.histogram.count"] = s.cumulativeTotal(buildsim.HistogramName, nil)
	return out
}

// cloudWatchTotals adds up PutMetricData datums: the exporter sends deltas,
// so a counter's total is the sum of its values and a histogram's count the
// sum of its sample counts.
func cloudWatchTotals(datums []cloudwatchtest.Datum, results []string) totals {
	out := totals{}
	add := func(key string, d cloudwatchtest.Datum) {
		switch {
		case d.Statistics != nil:
			out[key] += d.Statistics.SampleCount
		case len(d.Values) > 0:
			for i := range d.Values {
				c := 1.0
				if i < len(d.Counts) {
					c = d.Counts[i]
				}
				out[key] += c
			}
		case d.Value != nil:
			out[key] += *d.Value
		}
	}
	for _, d := range datums {
		switch d.MetricName {
		case "build.jobs":
			if slices.Contains(results, d.Dimensions["build.result"]) {
				add("build.jobs{"+d.Dimensions["build.result"]+"}", d)
			}
		case "build.stage.runs", "api.requests":
			add(d.MetricName, d)
		case buildsim.CounterName:
			add("sdk.counter", d)
		case buildsim.HistogramName:
			add("sdk.histogram.count", d)
		}
	}
	return out
}

func simConfig(p collectorPorts, service string, seed int64) buildsim.Config {
	cfg := buildsim.DefaultConfig()
	cfg.Protocol = buildsim.ProtocolHTTP
	cfg.Endpoint = fmt.Sprintf("127.0.0.1:%d", p.HTTP)
	cfg.ServiceName = service
	cfg.InstanceID = service + "-0"
	cfg.Seed = seed
	cfg.Jobs = 80
	cfg.Rate = 80
	cfg.FailureRatio = 0.15
	cfg.CancelRatio = 0.05
	cfg.API4xxRatio = 0.06
	cfg.API5xxRatio = 0.03
	cfg.MetricInterval = 500 * time.Millisecond
	cfg.ExportTimeout = 5 * time.Second
	cfg.RetryMaxElapsed = 30 * time.Second
	return cfg
}

func runSim(t testing.TB, cfg buildsim.Config) *buildsim.Summary {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := buildsim.Run(ctx, cfg, buildsim.WithLogf(t.Logf))
	require.NoError(t, err)
	require.True(t, s.Exports.Complete(), "the collector refused exports: %+v", s.Exports)
	require.Equal(t, s.Generated, s.Acknowledged)
	return s
}

// stores is every destination of one collector run.
type stores struct {
	cw         *cloudwatchtest.Server
	otlp       *otlpSink
	cwOTLP     *otlpSink
	scrape     *prometheusServer
	remote     *prometheusServer
	remoteIn   *countingProxy
	promTarget string
}

func startStores(t testing.TB) *stores {
	t.Helper()
	cw, err := cloudwatchtest.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = cw.Close() })
	s := &stores{cw: cw, otlp: startOTLPSink(t, false), cwOTLP: startOTLPSink(t, true)}
	// The sidecar's scrape target and the two servers'.
	ports := binarytest.FreePorts(t, 3)
	s.promTarget = fmt.Sprintf("127.0.0.1:%d", ports[0])
	s.scrape = startPrometheus(t, ports[1], s.promTarget)
	s.remote = startPrometheus(t, ports[2], "")
	s.remoteIn = startCountingProxy(t, s.remote.URL)
	return s
}

const allDestinations = "cloudwatch,cloudwatch-otlp,prometheus,prometheus-remote-write,otlp"

func (s *stores) env(p collectorPorts, queueDir string) []string {
	_, promPort, _ := strings.Cut(s.promTarget, ":")
	return collectorEnv(p, queueDir,
		"GPUBUILD_DESTINATIONS="+allDestinations,
		"GPUBUILD_CLOUDWATCH_ENDPOINT="+s.cw.Endpoint(),
		"GPUBUILD_CLOUDWATCH_OTLP_ENDPOINT="+s.cwOTLP.URL+"/v1/metrics",
		"GPUBUILD_PROMETHEUS_PORT="+promPort,
		"GPUBUILD_PROMETHEUS_REMOTE_WRITE_ENDPOINT="+s.remoteIn.URL+"/api/v1/write",
		"GPUBUILD_OTLP_ENDPOINT="+s.otlp.URL,
		"GPUBUILD_OTLP_HEADERS=x-tenant=build%20team",
		"GPUBUILD_DESTINATION_RETRY_MAX_ELAPSED=10m",
	)
}

// destinationTotals reads every store.
func (s *stores) destinationTotals(results []string) map[string]totals {
	out := map[string]totals{
		"cloudwatch":      cloudWatchTotals(s.cw.Datums(), results),
		"cloudwatch-otlp": otlpTotals(s.cwOTLP, results),
		"otlp":            otlpTotals(s.otlp, results),
	}
	if p, err := prometheusTotals(s.scrape); err == nil {
		out["prometheus"] = p
	} else {
		out["prometheus"] = totals{"error: " + err.Error(): 1}
	}
	if p, err := prometheusTotals(s.remote); err == nil {
		out["prometheus-remote-write"] = p
	} else {
		out["prometheus-remote-write"] = totals{"error: " + err.Error(): 1}
	}
	return out
}

// awaitExact waits until every named destination holds exactly want.
func awaitExact(t testing.TB, s *stores, want totals, names []string, timeout time.Duration) {
	t.Helper()
	results := resultsOf(want)
	var last map[string]totals
	start := time.Now()
	exactAfter := map[string]time.Duration{}
	ok := binarytest.Eventually(timeout, func() bool {
		last = s.destinationTotals(results)
		all := true
		for _, n := range names {
			if !maps.Equal(last[n], want) {
				all = false
			} else if _, seen := exactAfter[n]; !seen {
				exactAfter[n] = time.Since(start).Round(100 * time.Millisecond)
			}
		}
		return all
	})
	t.Logf("exact after: %v", exactAfter)
	if !ok {
		for _, n := range names {
			if !maps.Equal(last[n], want) {
				t.Errorf("%s: got %v, want %v", n, last[n], want)
			}
		}
		t.FailNow()
	}
}

func resultsOf(want totals) []string {
	var out []string
	for k := range want {
		if r, ok := strings.CutPrefix(k, "build.jobs{"); ok {
			out = append(out, strings.TrimSuffix(r, "}"))
		}
	}
	return out
}

var destinationNames = strings.Split(allDestinations, ",")

func TestAllDestinationsExact(t *testing.T) {
	s := startStores(t)
	p := newCollectorPorts(t)
	startCollector(t, p, s.env(p, t.TempDir()))

	sum := runSim(t, simConfig(p, "vector-index-build", 11))
	want := truthTotals(sum)
	require.Greater(t, want["build.jobs{success}"], 0.0)
	require.Greater(t, want["sdk.counter"], 0.0)

	awaitExact(t, s, want, destinationNames, 2*time.Minute)

	// Every CloudWatch OTLP request was signed for service monitoring and
	// verified over the body as received.
	require.Zero(t, s.cwOTLP.badSigs.Load(), "requests with a bad SigV4 signature")
	require.Positive(t, s.cwOTLP.accepted.Load())

	// The OTLP destination is cumulative (GPUBUILD_OTLP_TEMPORALITY's
	// default), including the build metrics derived as deltas.
	for name, temps := range s.otlp.temporalities() {
		require.Equal(t, 1, len(temps), name)
		for temp := range temps {
			require.Equal(t, "Cumulative", temp.String(), name)
		}
	}
	logTraffic(t, s)
	// How many points one remote-write request carries: what a request the
	// store refuses for good loses there.
	t.Logf("traffic: prometheus-remote-write %v points sent in %d requests",
		exporterPoints(t, p, "otelcol_exporter_sent_metric_points", "prometheusremotewrite/destination"), s.remoteIn.requests.Load())
}

// logTraffic prints what each store received, the inputs of the cost table
// in docs/destinations.md.
func logTraffic(t testing.TB, s *stores) {
	metrics := map[string]bool{}
	var cwBytes int
	for _, d := range s.cw.Datums() {
		metrics[fmt.Sprint(d.MetricName, d.Dimensions)] = true
	}
	for _, r := range s.cw.Requests() {
		cwBytes += r.BodyBytes
	}
	t.Logf("traffic: PutMetricData %d requests, %d datums, %d distinct metrics, %d bytes uncompressed CBOR", len(s.cw.Requests()), len(s.cw.Datums()), len(metrics), cwBytes)
	for name, sink := range map[string]*otlpSink{"cloudwatch-otlp": s.cwOTLP, "otlp": s.otlp} {
		t.Logf("traffic: %s %d requests, %d points, %d bytes sent (gzip), %d bytes serialized OTLP", name, sink.accepted.Load(), sink.points.Load(), sink.bytes.Load(), sink.rawBytes.Load())
	}
	series, _ := s.remote.Query(`count({__name__=~".+"})`)
	if len(series) == 1 {
		t.Logf("traffic: prometheus-remote-write %d requests, %d bytes (snappy), %v series stored", s.remoteIn.requests.Load(), s.remoteIn.bytes.Load(), series[0].Value)
	}
	scraped, _ := s.scrape.Query(`scrape_samples_scraped`)
	if len(scraped) == 1 {
		t.Logf("traffic: prometheus %v samples per scrape", scraped[0].Value)
	}
}

// The local CloudWatch OTLP endpoint is only a check if it refuses what AWS
// refuses: no signature, a signature made with another secret, or one made
// for another service.
func TestCloudWatchOTLPEndpointRefusesBadSignatures(t *testing.T) {
	sink := startOTLPSink(t, true)
	body, err := pmetricotlp.NewExportRequest().MarshalProto()
	require.NoError(t, err)
	send := func(creds *aws.Credentials, service string) int {
		req, err := http.NewRequest(http.MethodPost, sink.URL+"/v1/metrics", bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-protobuf")
		if creds != nil {
			h := sha256.Sum256(body)
			require.NoError(t, v4.NewSigner().SignHTTP(context.Background(), *creds, req, hex.EncodeToString(h[:]), service, testRegion, time.Now()))
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	wrong := testCreds
	wrong.SecretAccessKey = "not-the-secret"
	require.Equal(t, http.StatusForbidden, send(nil, "monitoring"))
	require.Equal(t, http.StatusForbidden, send(&wrong, "monitoring"))
	require.Equal(t, http.StatusForbidden, send(&testCreds, "execute-api"))
	require.Equal(t, http.StatusOK, send(&testCreds, "monitoring"))
	require.EqualValues(t, 3, sink.badSigs.Load())
}

// One store down for the whole run: the others are exact while it is down,
// and it is exact once it is back (its queue or write-ahead log kept
// everything, nothing twice).
func TestOneDestinationDownOthersExact(t *testing.T) {
	for _, down := range []string{"otlp", "prometheus-remote-write"} {
		t.Run(down, func(t *testing.T) {
			s := startStores(t)
			setDown := map[string]func(bool){
				"otlp":                    s.otlp.down.Store,
				"prometheus-remote-write": s.remoteIn.down.Store,
			}[down]
			refused := map[string]func() int64{
				"otlp":                    s.otlp.refused.Load,
				"prometheus-remote-write": s.remoteIn.refused.Load,
			}[down]
			setDown(true)
			p := newCollectorPorts(t)
			startCollector(t, p, s.env(p, t.TempDir()))

			want := truthTotals(runSim(t, simConfig(p, "vector-index-build", 23)))
			others := slices.DeleteFunc(slices.Clone(destinationNames), func(n string) bool { return n == down })
			awaitExact(t, s, want, others, 2*time.Minute)
			require.True(t, binarytest.Eventually(time.Minute, func() bool { return refused() > 0 }), "the downed store was tried")
			require.NotEqual(t, want, s.destinationTotals(resultsOf(want))[down], "the downed store has nothing yet")

			setDown(false)
			awaitExact(t, s, want, destinationNames, 2*time.Minute)
		})
	}
}

// otlp over gRPC with delta temporality: the pass-through cumulative SDK
// metrics are converted to deltas, the derived build metrics stay deltas,
// and every delta adds up to the truth.
func TestOTLPDeltaOverGRPC(t *testing.T) {
	g := startOTLPGRPCSink(t)
	p := newCollectorPorts(t)
	startCollector(t, p, collectorEnv(p, t.TempDir(),
		"GPUBUILD_DESTINATIONS=otlp",
		"GPUBUILD_OTLP_ENDPOINT="+g.sink.URL,
		"GPUBUILD_OTLP_PROTOCOL=grpc",
		"GPUBUILD_OTLP_TEMPORALITY=delta",
		"GPUBUILD_OTLP_HEADERS=x-tenant=build%20team",
	))
	want := truthTotals(runSim(t, simConfig(p, "vector-index-build", 31)))
	require.Greater(t, want["sdk.counter"], 0.0)
	require.Greater(t, want["build.stage.runs"], 0.0)
	var got totals
	if !binarytest.Eventually(2*time.Minute, func() bool { got = g.sink.deltaTotals(resultsOf(want)); return maps.Equal(got, want) }) {
		t.Fatalf("otlp (delta, grpc): got %v, want %v", got, want)
	}
	for name, temps := range g.sink.temporalities() {
		require.Equal(t, map[pmetric.AggregationTemporality]bool{pmetric.AggregationTemporalityDelta: true}, temps, name)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	require.Equal(t, []string{"build team"}, g.metadata.Get("x-tenant"), "GPUBUILD_OTLP_HEADERS arrive as gRPC metadata")
}

func TestValidateNamesTheVariable(t *testing.T) {
	p := newCollectorPorts(t)
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{[]string{"GPUBUILD_DESTINATIONS=cloudwatch,influxdb"}, `GPUBUILD_DESTINATIONS: unknown destination "influxdb" (accepted: cloudwatch, cloudwatch-otlp, prometheus, prometheus-remote-write, otlp, gateway)`},
		{[]string{"GPUBUILD_DESTINATIONS=otlp"}, "GPUBUILD_OTLP_ENDPOINT is required by GPUBUILD_DESTINATIONS=otlp"},
		{[]string{"GPUBUILD_DESTINATIONS=prometheus-remote-write"}, "GPUBUILD_PROMETHEUS_REMOTE_WRITE_ENDPOINT is required by GPUBUILD_DESTINATIONS=prometheus-remote-write"},
		{[]string{"GPUBUILD_DESTINATIONS=otlp", "GPUBUILD_OTLP_ENDPOINT=http://127.0.0.1:4318", "GPUBUILD_OTLP_PROTOCOL=http/json"}, `GPUBUILD_OTLP_PROTOCOL: "http/json" is not a protocol (accepted: grpc, http/protobuf)`},
		{[]string{"GPUBUILD_DESTINATIONS=prometheus", "GPUBUILD_PROMETHEUS_PORT=http"}, `GPUBUILD_PROMETHEUS_PORT: "http" is not a TCP port (accepted: 1-65535)`},
	} {
		env := collectorEnv(p, t.TempDir(), tc.env...)
		out, err := validate(t, env)
		require.Error(t, err, "%v: %s", tc.env, out)
		var lines []string
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, tc.want) {
				lines = append(lines, l)
			}
		}
		require.Len(t, lines, 1, "%v: one line naming the variable, got:\n%s", tc.env, out)
	}
	// cloudwatch-otlp without a region: the collector environment always
	// sets AWS_REGION, so drop it here.
	env := slices.DeleteFunc(collectorEnv(p, t.TempDir(), "GPUBUILD_DESTINATIONS=cloudwatch-otlp"), func(kv string) bool { return strings.HasPrefix(kv, "AWS_REGION=") })
	out, err := validate(t, env)
	require.Error(t, err)
	require.Contains(t, out, "AWS_REGION is required by GPUBUILD_DESTINATIONS=cloudwatch-otlp")

	// Every destination, well configured, validates.
	env = collectorEnv(p, t.TempDir(),
		"GPUBUILD_DESTINATIONS="+allDestinations,
		"GPUBUILD_PROMETHEUS_REMOTE_WRITE_ENDPOINT=http://127.0.0.1:9090/api/v1/write",
		"GPUBUILD_OTLP_ENDPOINT=127.0.0.1:4317", "GPUBUILD_OTLP_PROTOCOL=grpc", "GPUBUILD_OTLP_TEMPORALITY=delta")
	out, err = validate(t, env)
	require.NoError(t, err, out)
}
