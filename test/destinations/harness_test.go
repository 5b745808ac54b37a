// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package destinations

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/gpubuild/otelcol-gpubuild/test/internal/binarytest"
)

// Fake AWS credentials: the local CloudWatch OTLP endpoint verifies the
// SigV4 signature with them, as AWS does with the real ones.
var testCreds = aws.Credentials{
	AccessKeyID:     "AKIDDESTINATIONS0001",
	SecretAccessKey: "destinationsSecretKey0000000000000000000",
	SessionToken:    "destinationsSessionToken",
}

const testRegion = "us-east-1"

// prometheusServer is Debian's prometheus binary on a free loopback port
// the caller picked, with its own temporary TSDB: it scrapes target (when
// set) every second and accepts remote write at /api/v1/write.
type prometheusServer struct {
	URL string
}

func startPrometheus(t testing.TB, port int, scrapeTarget string) *prometheusServer {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	require.NoError(t, err, "the Prometheus server is not installed: run `make deps` (Debian package prometheus)")
	dir := t.TempDir()
	// No out-of-order window: like a default Prometheus, the store refuses
	// a sample older than the newest of its series (HTTP 400).
	cfg := "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
	if scrapeTarget != "" {
		cfg += fmt.Sprintf("scrape_configs:\n  - job_name: sidecar\n    honor_labels: true\n    static_configs:\n      - targets: [%q]\n", scrapeTarget)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600))
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
	p := &prometheusServer{URL: fmt.Sprintf("http://127.0.0.1:%d", port)}
	require.NoError(t, proc.AwaitHealthy(p.URL+"/-/ready", 60*time.Second), "prometheus did not become ready")
	return p
}

// promSample is one series of an instant query's answer.
type promSample struct {
	Metric map[string]string
	Value  float64
}

func (p *prometheusServer) query(promql string) ([]promSample, error) {
	var result []struct {
		Metric map[string]string `json:"metric"`
		Value  [2]any            `json:"value"`
	}
	if err := p.get(promql, &result); err != nil {
		return nil, err
	}
	out := make([]promSample, 0, len(result))
	for _, r := range result {
		v, err := sampleValue(r.Value)
		if err != nil {
			return nil, err
		}
		out = append(out, promSample{Metric: r.Metric, Value: v})
	}
	return out, nil
}

// get runs an instant query and decodes its data's result into result.
func (p *prometheusServer) get(promql string, result any) error {
	resp, err := http.Get(p.URL + "/api/v1/query?query=" + url.QueryEscape(promql))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
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

// countingProxy forwards to target and counts requests and body bytes:
// what remote write sends over the wire. It also counts the store's own
// 4xx answers (a request refused for good) and keeps the last one's body.
type countingProxy struct {
	URL       string
	down      atomic.Bool
	refused   atomic.Int64
	requests  atomic.Int64
	bytes     atomic.Int64
	refused4x atomic.Int64
	mu        sync.Mutex
	last4x    string
}

// last4xx is the body of the store's last 4xx answer.
func (c *countingProxy) last4xx() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last4x
}

func startCountingProxy(t testing.TB, target string) *countingProxy {
	t.Helper()
	u, err := url.Parse(target)
	require.NoError(t, err)
	c := &countingProxy{}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ModifyResponse = func(resp *http.Response) error {
		if resp.StatusCode < 400 || resp.StatusCode >= 500 {
			return nil
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		c.refused4x.Add(1)
		c.mu.Lock()
		c.last4x = strings.TrimSpace(string(body))
		c.mu.Unlock()
		return nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if c.down.Load() {
			c.refused.Add(1)
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
			return
		}
		c.requests.Add(1)
		c.bytes.Add(int64(len(body)))
		r.Body = io.NopCloser(bytes.NewReader(body))
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	c.URL = "http://" + ln.Addr().String()
	return c
}

// byLabel runs a `sum by (label)` query and returns label value -> sum.
// promSeries is one series of a range selector's answer: its samples'
// values in time order.
type promSeries struct {
	Metric map[string]string
	Values []float64
}

// samples runs an instant query of a range selector (e.g. `m[1h]`) and
// returns every stored sample of each series.
func (p *prometheusServer) samples(rangeSelector string) ([]promSeries, error) {
	var result []struct {
		Metric map[string]string `json:"metric"`
		Values [][2]any          `json:"values"`
	}
	if err := p.get(rangeSelector, &result); err != nil {
		return nil, err
	}
	out := make([]promSeries, 0, len(result))
	for _, r := range result {
		sr := promSeries{Metric: r.Metric}
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

func (p *prometheusServer) byLabel(promql, label string) (map[string]float64, error) {
	samples, err := p.query(promql)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, s := range samples {
		out[s.Metric[label]] += s.Value
	}
	return out, nil
}

// otlpSink is an OTLP/HTTP metrics endpoint that keeps what it accepts.
// With sigv4 set it is a CloudWatch OTLP endpoint: it recomputes each
// request's SigV4 signature (service monitoring) over the body it received
// and refuses a missing or wrong one with 403, as AWS does.
type otlpSink struct {
	URL      string
	sigv4    bool
	down     atomic.Bool
	mu       sync.Mutex
	metrics  []pmetric.Metrics
	accepted atomic.Int64
	refused  atomic.Int64
	bytes    atomic.Int64 // request bodies as sent (compressed)
	rawBytes atomic.Int64 // serialized OTLP, what CloudWatch OTLP bills
	points   atomic.Int64
	badSigs  atomic.Int64
	// refusal, when set, is how the sink answers a request holding the
	// metric it names: a partial success without that metric's points, or
	// a 400 for the whole request. refused counts the 400s and the points
	// they held; rejected the points left out of partial successes.
	refusal        *sinkRefusal
	refused4x      atomic.Int64
	refusedPoints  atomic.Int64
	rejectedPoints atomic.Int64
}

type sinkRefusal struct {
	metric     string
	wholeAs400 bool
}

func (s *otlpSink) refuse(r sinkRefusal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refusal = &r
}

func hasMetric(md pmetric.Metrics, name string) bool {
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		sms := rms.At(i).ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				if ms.At(k).Name() == name {
					return true
				}
			}
		}
	}
	return false
}

// withoutMetric removes the named metric from md and returns how many
// points it had.
func withoutMetric(md pmetric.Metrics, name string) int64 {
	var removed int64
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		sms := rms.At(i).ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			sms.At(j).Metrics().RemoveIf(func(m pmetric.Metric) bool {
				if m.Name() != name {
					return false
				}
				one := pmetric.NewMetrics()
				m.CopyTo(one.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty())
				removed += int64(one.DataPointCount())
				return true
			})
		}
	}
	return removed
}

func startOTLPSink(t testing.TB, sigv4 bool) *otlpSink {
	t.Helper()
	s := &otlpSink{sigv4: sigv4}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	s.URL = "http://" + ln.Addr().String()
	return s
}

func (s *otlpSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if r.URL.Path != "/v1/metrics" {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	if s.down.Load() {
		s.refused.Add(1)
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return
	}
	if s.sigv4 {
		if err := verifySigV4(r, body); err != nil {
			s.badSigs.Add(1)
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
	}
	s.bytes.Add(int64(len(body)))
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err == nil {
			body, err = io.ReadAll(zr)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	}
	req := pmetricotlp.NewExportRequest()
	if err := req.UnmarshalProto(body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	refusal := s.refusal
	s.mu.Unlock()
	answer := pmetricotlp.NewExportResponse()
	if refusal != nil && hasMetric(req.Metrics(), refusal.metric) {
		if refusal.wholeAs400 {
			s.refused4x.Add(1)
			s.refusedPoints.Add(int64(req.Metrics().DataPointCount()))
			http.Error(w, "invalid metric "+refusal.metric, http.StatusBadRequest)
			return
		}
		n := withoutMetric(req.Metrics(), refusal.metric)
		s.rejectedPoints.Add(n)
		answer.PartialSuccess().SetRejectedDataPoints(n)
		answer.PartialSuccess().SetErrorMessage("invalid metric " + refusal.metric)
	}
	s.rawBytes.Add(int64(len(body)))
	s.points.Add(int64(req.Metrics().DataPointCount()))
	s.mu.Lock()
	s.metrics = append(s.metrics, req.Metrics())
	s.mu.Unlock()
	s.accepted.Add(1)
	resp, _ := answer.MarshalProto()
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(resp)
}

// grpcSink serves OTLP/gRPC into an otlpSink and records the metadata
// (headers) of the last request.
type grpcSink struct {
	pmetricotlp.UnimplementedGRPCServer
	sink     *otlpSink
	mu       sync.Mutex
	metadata metadata.MD
}

func (g *grpcSink) Export(ctx context.Context, req pmetricotlp.ExportRequest) (pmetricotlp.ExportResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	g.mu.Lock()
	g.metadata = md
	g.mu.Unlock()
	g.sink.points.Add(int64(req.Metrics().DataPointCount()))
	g.sink.mu.Lock()
	g.sink.metrics = append(g.sink.metrics, req.Metrics())
	g.sink.mu.Unlock()
	g.sink.accepted.Add(1)
	return pmetricotlp.NewExportResponse(), nil
}

func startOTLPGRPCSink(t testing.TB) *grpcSink {
	t.Helper()
	g := &grpcSink{sink: &otlpSink{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	pmetricotlp.RegisterGRPCServer(srv, g)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	g.sink.URL = "http://" + ln.Addr().String()
	return g
}

// verifySigV4 re-signs the request with the test credentials, using the
// headers it says it signed and the date it carries, and compares.
func verifySigV4(r *http.Request, body []byte) error {
	auth := r.Header.Get("Authorization")
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 ") {
		return fmt.Errorf("no SigV4 Authorization header")
	}
	fields := map[string]string{}
	for _, f := range strings.Split(strings.TrimPrefix(auth, "AWS4-HMAC-SHA256 "), ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(f), "=")
		fields[k] = v
	}
	scope := strings.Split(fields["Credential"], "/")
	if len(scope) != 5 || scope[0] != testCreds.AccessKeyID || scope[2] != testRegion || scope[3] != "monitoring" || scope[4] != "aws4_request" {
		return fmt.Errorf("credential scope %q is not <key>/<date>/%s/monitoring/aws4_request", fields["Credential"], testRegion)
	}
	signingTime, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return fmt.Errorf("X-Amz-Date: %w", err)
	}
	check, err := http.NewRequest(r.Method, "http://"+r.Host+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return err
	}
	for _, h := range strings.Split(fields["SignedHeaders"], ";") {
		if h == "host" {
			continue
		}
		check.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
	}
	check.Header.Del("Authorization")
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(context.Background(), testCreds, check, hex.EncodeToString(sum[:]), "monitoring", testRegion, signingTime); err != nil {
		return err
	}
	if check.Header.Get("Authorization") != auth {
		return fmt.Errorf("signature does not match the body received")
	}
	return nil
}

// cumulativeTotal sums, over every series of the named metric whose point
// attributes include want, the value of its latest point: a cumulative
// series' total. Sums and histograms (the count) are read.
func (s *otlpSink) cumulativeTotal(name string, want map[string]string) float64 {
	latest := map[string]struct {
		ts    pcommon.Timestamp
		value float64
	}{}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, md := range s.metrics {
		rms := md.ResourceMetrics()
		for i := 0; i < rms.Len(); i++ {
			res := rms.At(i).Resource().Attributes().AsRaw()
			sms := rms.At(i).ScopeMetrics()
			for j := 0; j < sms.Len(); j++ {
				ms := sms.At(j).Metrics()
				for k := 0; k < ms.Len(); k++ {
					m := ms.At(k)
					if m.Name() != name {
						continue
					}
					see := func(attrs pcommon.Map, start, ts pcommon.Timestamp, v float64) {
						for wk, wv := range want {
							if got, ok := attrs.Get(wk); !ok || got.AsString() != wv {
								return
							}
						}
						id := fmt.Sprint(res, attrs.AsRaw(), start)
						if cur, ok := latest[id]; !ok || ts >= cur.ts {
							latest[id] = struct {
								ts    pcommon.Timestamp
								value float64
							}{ts, v}
						}
					}
					switch m.Type() {
					case pmetric.MetricTypeSum:
						dps := m.Sum().DataPoints()
						for p := 0; p < dps.Len(); p++ {
							dp := dps.At(p)
							v := dp.DoubleValue()
							if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
								v = float64(dp.IntValue())
							}
							see(dp.Attributes(), dp.StartTimestamp(), dp.Timestamp(), v)
						}
					case pmetric.MetricTypeHistogram:
						dps := m.Histogram().DataPoints()
						for p := 0; p < dps.Len(); p++ {
							dp := dps.At(p)
							see(dp.Attributes(), dp.StartTimestamp(), dp.Timestamp(), float64(dp.Count()))
						}
					}
				}
			}
		}
	}
	var total float64
	for _, l := range latest {
		total += l.value
	}
	return total
}

// deltaTotal sums every point of the named metric whose attributes include
// want: a delta series' total (sums' values, histograms' counts).
func (s *otlpSink) deltaTotal(name string, want map[string]string) float64 {
	var total float64
	s.mu.Lock()
	defer s.mu.Unlock()
	match := func(attrs pcommon.Map) bool {
		for wk, wv := range want {
			if got, ok := attrs.Get(wk); !ok || got.AsString() != wv {
				return false
			}
		}
		return true
	}
	for _, md := range s.metrics {
		rms := md.ResourceMetrics()
		for i := 0; i < rms.Len(); i++ {
			sms := rms.At(i).ScopeMetrics()
			for j := 0; j < sms.Len(); j++ {
				ms := sms.At(j).Metrics()
				for k := 0; k < ms.Len(); k++ {
					m := ms.At(k)
					if m.Name() != name {
						continue
					}
					switch m.Type() {
					case pmetric.MetricTypeSum:
						dps := m.Sum().DataPoints()
						for p := 0; p < dps.Len(); p++ {
							if dp := dps.At(p); match(dp.Attributes()) {
								if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
									total += float64(dp.IntValue())
								} else {
									total += dp.DoubleValue()
								}
							}
						}
					case pmetric.MetricTypeHistogram:
						dps := m.Histogram().DataPoints()
						for p := 0; p < dps.Len(); p++ {
							if dp := dps.At(p); match(dp.Attributes()) {
								total += float64(dp.Count())
							}
						}
					}
				}
			}
		}
	}
	return total
}

// temporalities reports the aggregation temporality of every sum and
// histogram the sink received, by metric name.
func (s *otlpSink) temporalities() map[string]map[pmetric.AggregationTemporality]bool {
	out := map[string]map[pmetric.AggregationTemporality]bool{}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, md := range s.metrics {
		rms := md.ResourceMetrics()
		for i := 0; i < rms.Len(); i++ {
			sms := rms.At(i).ScopeMetrics()
			for j := 0; j < sms.Len(); j++ {
				ms := sms.At(j).Metrics()
				for k := 0; k < ms.Len(); k++ {
					m := ms.At(k)
					var temp pmetric.AggregationTemporality
					switch m.Type() {
					case pmetric.MetricTypeSum:
						temp = m.Sum().AggregationTemporality()
					case pmetric.MetricTypeHistogram:
						temp = m.Histogram().AggregationTemporality()
					default:
						continue
					}
					if out[m.Name()] == nil {
						out[m.Name()] = map[pmetric.AggregationTemporality]bool{}
					}
					out[m.Name()][temp] = true
				}
			}
		}
	}
	return out
}

type collectorPorts struct {
	GRPC, HTTP, Health, Telemetry int
}

func newCollectorPorts(t testing.TB) collectorPorts {
	p := binarytest.FreePorts(t, 4)
	return collectorPorts{GRPC: p[0], HTTP: p[1], Health: p[2], Telemetry: p[3]}
}

// collectorEnv is a clean environment (nothing of the runner's AWS, GPUBUILD
// or OTEL settings) with the test credentials, the ports and extra.
func collectorEnv(p collectorPorts, queueDir string, extra ...string) []string {
	env := binarytest.EnvWithout("AWS_", "GPUBUILD_", "OTEL_")
	env = append(env,
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_ACCESS_KEY_ID="+testCreds.AccessKeyID,
		"AWS_SECRET_ACCESS_KEY="+testCreds.SecretAccessKey,
		"AWS_SESSION_TOKEN="+testCreds.SessionToken,
		"AWS_CONFIG_FILE=/dev/null",
		"AWS_SHARED_CREDENTIALS_FILE=/dev/null",
		"AWS_REGION="+testRegion,
		fmt.Sprintf("GPUBUILD_OTLP_GRPC_PORT=%d", p.GRPC),
		fmt.Sprintf("GPUBUILD_OTLP_HTTP_PORT=%d", p.HTTP),
		fmt.Sprintf("GPUBUILD_HEALTH_PORT=%d", p.Health),
		fmt.Sprintf("GPUBUILD_TELEMETRY_PORT=%d", p.Telemetry),
		"GPUBUILD_QUEUE_DIR="+queueDir,
		"GPUBUILD_FLUSH_INTERVAL=1s",
	)
	return append(env, extra...)
}

// startCollector runs the built binary on the repository's own
// otelcol-config.yaml, configured through the environment only, until it
// is healthy.
func startCollector(t testing.TB, p collectorPorts, env []string) *binarytest.Process {
	t.Helper()
	c := binarytest.StartBinary(t, env, "--config", filepath.Join(binarytest.RepoRoot(), "otelcol-config.yaml"))
	require.NoError(t, c.AwaitHealthy(fmt.Sprintf("http://127.0.0.1:%d/", p.Health), 60*time.Second), "collector not healthy")
	return c
}

// validate runs `otelcol-gpubuild validate` on the default config with env.
func validate(t testing.TB, env []string) (string, error) {
	t.Helper()
	cmd := exec.Command(binarytest.Binary(t), "validate", "--config", filepath.Join(binarytest.RepoRoot(), "otelcol-config.yaml"))
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return string(out), err
}
