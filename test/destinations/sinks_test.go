// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package destinations

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/buildsim"
)

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
	refusal       *sinkRefusal
	refused4x     atomic.Int64
	refusedPoints atomic.Int64
	// refusedRequests holds the requests refused whole (guarded by mu).
	refusedRequests []pmetric.Metrics
	rejectedPoints  atomic.Int64
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

// refusedPointsOf is how many points of the service's resources the
// requests refused whole held (a request also carries other resources' points,
// such as the collector's own pipeline health).
func (s *otlpSink) refusedPointsOf(service string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, md := range s.refusedRequests {
		rms := md.ResourceMetrics()
		for i := 0; i < rms.Len(); i++ {
			if v, ok := rms.At(i).Resource().Attributes().Get("service.name"); ok && v.Str() == service {
				one := pmetric.NewMetrics()
				rms.At(i).CopyTo(one.ResourceMetrics().AppendEmpty())
				n += one.DataPointCount()
			}
		}
	}
	return n
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
			kept := pmetric.NewMetrics()
			req.Metrics().CopyTo(kept)
			s.mu.Lock()
			s.refusedRequests = append(s.refusedRequests, kept)
			s.mu.Unlock()
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
// series' total. Sums and histograms (the count) are read. A new start
// time is a new series (a restarted process's counts add up).
func (s *otlpSink) cumulativeTotal(name string, want map[string]string) float64 {
	return s.lastValues(name, want, true)
}

// latestTotal is cumulativeTotal with a series named by its resource and
// attributes alone, whatever its start time: what a store reading each
// series' last value shows.
func (s *otlpSink) latestTotal(name string, want map[string]string) float64 {
	return s.lastValues(name, want, false)
}

// lastValues sums the latest value of each series of the named metric whose
// point attributes include want; byStart tells series apart by start time.
func (s *otlpSink) lastValues(name string, want map[string]string, byStart bool) float64 {
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
						id := fmt.Sprint(res, attrs.AsRaw())
						if byStart {
							id += fmt.Sprint(start)
						}
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

// deltaTotals reads the workload's totals from a delta series store: the
// sums of every point (results: the build results to read).
func (s *otlpSink) deltaTotals(results []string) totals {
	out := totals{}
	for _, r := range results {
		if v := s.deltaTotal("build.jobs", map[string]string{"build.result": r}); v > 0 {
			out["build.jobs{"+r+"}"] = v
		}
	}
	out["build.stage.runs"] = s.deltaTotal("build.stage.runs", nil)
	out["api.requests"] = s.deltaTotal("api.requests", nil)
	out["sdk.counter"] = s.deltaTotal(buildsim.CounterName, nil)
	out["sdk.histogram.count"] = s.deltaTotal(buildsim.HistogramName, nil)
	return out
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
