// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package cloudwatchtest is a local CloudWatch PutMetricData endpoint for
// tests, benchmarks and demos. It speaks the protocol
// aws-sdk-go-v2/service/cloudwatch v1.75.4 uses (Smithy RPC v2 CBOR, gzip
// request bodies), enforces CloudWatch's documented limits, answers errors
// the way CloudWatch does (so the SDK classifies them as it would in
// production), records every accepted datum and injects faults on demand:
// throttling, 5xx, latency, late answers after storing, refused access keys,
// a lowered size limit, dropped connections and outages.
//
// Point the SDK at it with cloudwatch.Options.BaseEndpoint = s.Endpoint()
// (any region and static credentials will do: signatures are not checked;
// only the access key id is read, when Faults.AcceptedAccessKeys is set).
package cloudwatchtest // import "github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"

import (
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/smithy-go/encoding/cbor"
)

// PutMetricDataPath is where the SDK posts PutMetricData (RPC v2: service shape name and operation).
const PutMetricDataPath = "/service/GraniteServiceVersion20100801/operation/PutMetricData"

// Faults are failures injected into the requests that follow SetFaults.
// Every n-th request counts from the call to SetFaults; when several apply
// to the same request, the connection is dropped first, then throttled,
// then answered 503.
type Faults struct {
	// ThrottleEvery answers every n-th request with CloudWatch's throttling
	// error (HTTP 400, code Throttling, "Rate exceeded"); 0 = never.
	ThrottleEvery int
	// ServerErrorEvery answers every n-th request with HTTP 503; 0 = never.
	ServerErrorEvery int
	// DropEvery closes the connection of every n-th request without an answer; 0 = never.
	DropEvery int
	// Latency is added before every answer.
	Latency time.Duration
	// AnswerDelay delays the answer to an accepted request after its datums
	// are stored, whether or not the client still waits: a CloudWatch that
	// stores the data and answers late.
	AnswerDelay time.Duration
	// MaxRequestBytes, when positive, lowers the request size limit (default
	// MaxRequestBytes): larger requests are answered 413 RequestEntityTooLarge.
	MaxRequestBytes int
	// AcceptedAccessKeys, when not empty, are the only access key ids
	// accepted (read from the SigV4 Authorization header, the signature is
	// not checked); a request signed with another key is answered with
	// AuthErrorCode as CloudWatch answers it.
	AcceptedAccessKeys []string
	// AuthErrorCode is the error answered to a refused key; default
	// InvalidClientTokenId. ExpiredToken, ExpiredTokenException and
	// RequestExpired are answered 400, every other code 403.
	AuthErrorCode string
	// RejectMetricName, when set, refuses a request holding a datum of this
	// metric name with 400 InvalidParameterValue, as CloudWatch refuses a
	// value it does not take (one a client did not foresee): nothing of the
	// request is stored.
	RejectMetricName string
}

// Stats counts requests by how they were answered.
type Stats struct {
	Requests     int // all requests to PutMetricData
	Accepted     int // answered 200
	Throttled    int // answered Throttling
	ServerErrors int // answered 503
	Rejected     int // answered 400/413 because a limit was violated
	AuthErrors   int // answered an auth error (AcceptedAccessKeys)
	Dropped      int // connection closed without an answer
}

// Datum is one accepted MetricDatum.
type Datum struct {
	Namespace         string            `json:"Namespace"`
	MetricName        string            `json:"MetricName"`
	Unit              string            `json:"Unit,omitempty"`
	Dimensions        map[string]string `json:"Dimensions,omitempty"`
	Timestamp         time.Time         `json:"Timestamp"`
	Value             *float64          `json:"Value,omitempty"`
	Values            []float64         `json:"Values,omitempty"`
	Counts            []float64         `json:"Counts,omitempty"`
	Statistics        *StatisticSet     `json:"StatisticValues,omitempty"`
	StorageResolution int32             `json:"StorageResolution"`
}

// StatisticSet is a datum's StatisticValues.
type StatisticSet struct{ SampleCount, Sum, Minimum, Maximum float64 }

// Request describes one request that reached validation.
type Request struct {
	Datums     int    // datums in the request
	BodyBytes  int    // decompressed body size
	Compressed bool   // the body was gzip-compressed
	ErrorCode  string // empty when accepted
	Message    string // the error message, when rejected
}

// Server is a running endpoint. Its methods are safe for concurrent use.
type Server struct {
	mu   sync.Mutex
	addr string
	srv  *http.Server
	// ln is closed here as well as by srv.Close: a Serve goroutine that has
	// not run yet would otherwise keep the port until it does.
	ln          net.Listener
	down        bool
	datums      []Datum
	requests    []Request
	stats       Stats
	faults      Faults
	faultSeq    int
	inFlight    int
	maxInFlight int
	now         func() time.Time
	onAccept    func([]Datum)
	onReject    func(Request)
}

// New returns a server that does not listen: use it as an http.Handler
// (e.g. behind an SDK HTTPClient that calls ServeHTTP, for fuzzing without
// sockets). Endpoint, Close and SetDown need Start.
func New() *Server {
	return &Server{now: time.Now}
}

// Start listens on addr (e.g. "127.0.0.1:0") and serves until Close.
// Port 0 picks a free port outside the kernel's ephemeral range, so that
// while the server is down (SetDown) no outgoing connection can take its
// port and SetDown(false) can listen on it again.
func Start(addr string) (*Server, error) {
	s := New()
	ln, err := listen(addr)
	if err != nil {
		return nil, err
	}
	s.addr = ln.Addr().String()
	s.serve(ln)
	return s, nil
}

func (s *Server) serve(ln net.Listener) {
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	s.srv, s.ln = srv, ln
	go func() { _ = srv.Serve(ln) }()
}

// Endpoint is the base URL to give the SDK (cloudwatch.Options.BaseEndpoint).
func (s *Server) Endpoint() string { return "http://" + s.addr }

// Close stops the server and closes every connection.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = true
	return s.stop()
}

// stop closes the listener now and every connection.
func (s *Server) stop() error {
	if s.srv == nil {
		return nil
	}
	err := s.srv.Close()
	_ = s.ln.Close() // already closed when Serve had started
	return err
}

// SetDown takes the endpoint down or up. SetDown(true) closes the listener and every open connection: a request on
// a kept-alive connection breaks, new connections are refused.
// SetDown(false) listens again on the same port.
func (s *Server) SetDown(down bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if down == s.down {
		return nil
	}
	if down {
		s.down = true
		return s.stop()
	}
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("listening again on %s: %w", s.addr, err)
	}
	s.down = false
	s.serve(ln)
	return nil
}

// SetFaults applies f to the requests from now on; Faults{} is healthy.
func (s *Server) SetFaults(f Faults) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults, s.faultSeq = f, 0
}

// SetClock replaces the clock the timestamp window is checked against.
func (s *Server) SetClock(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = now
}

// OnAccept calls fn with the datums of every accepted request, in the
// handler's goroutine, before the answer is sent.
func (s *Server) OnAccept(fn func([]Datum)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onAccept = fn
}

// OnReject calls fn for every request rejected for violating a limit.
func (s *Server) OnReject(fn func(Request)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onReject = fn
}

// Datums returns a copy of every accepted datum, in arrival order.
func (s *Server) Datums() []Datum {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.datums)
}

// WorkloadDatums returns a copy of every accepted datum but the collector's
// own pipeline health (metric names starting with otelcol_, which a
// sidecar sends with the data by default), in arrival order: what a test
// that counts its own workload compares.
func (s *Server) WorkloadDatums() []Datum {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Datum, 0, len(s.datums))
	for _, d := range s.datums {
		if !strings.HasPrefix(d.MetricName, "otelcol_") {
			out = append(out, d)
		}
	}
	return out
}

// Requests returns what every request that reached validation looked like, in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Stats returns the request counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// MaxInFlight is the most requests that were being handled at the same time.
func (s *Server) MaxInFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxInFlight
}

// Reset forgets datums, requests, stats and MaxInFlight.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.datums, s.requests, s.stats, s.maxInFlight = nil, nil, Stats{}, 0
}

// ServeHTTP answers one request as CloudWatch would.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != PutMetricDataPath {
		writeError(w, http.StatusNotFound, "UnknownOperationException", "", "only PutMetricData is served here")
		return
	}
	f, faults := s.nextFault(r)
	latency := faults.Latency
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}()
	if latency > 0 {
		select {
		case <-time.After(latency):
		case <-r.Context().Done():
			return
		}
	}
	switch f {
	case authFault:
		writeAuthError(w, faults.AuthErrorCode)
		return
	case dropFault:
		dropConnection(w)
		return
	case throttleFault:
		writeError(w, http.StatusBadRequest, "Throttling", "Throttling;Sender", "Rate exceeded")
		return
	case serverErrorFault:
		writeError(w, http.StatusServiceUnavailable, "ServiceUnavailable", "ServiceUnavailable;Receiver", "Service Unavailable")
		return
	}

	limit := MaxRequestBytes
	if faults.MaxRequestBytes > 0 {
		limit = faults.MaxRequestBytes
	}
	body, compressed, apiErr := readBody(r, limit)
	var datums []Datum
	if apiErr == nil {
		if r.Header.Get("Smithy-Protocol") != "rpc-v2-cbor" {
			apiErr = &apiError{status: http.StatusBadRequest, code: "InvalidParameterValue", typ: typeInvalidParameterValue,
				message: "Smithy-Protocol must be rpc-v2-cbor"}
		} else {
			s.mu.Lock()
			now := s.now()
			s.mu.Unlock()
			datums, apiErr = decodePutMetricData(body, now)
		}
	}
	if apiErr == nil && faults.RejectMetricName != "" {
		for i, d := range datums {
			if d.MetricName == faults.RejectMetricName {
				apiErr = &apiError{status: http.StatusBadRequest, code: "InvalidParameterValue", typ: typeInvalidParameterValue,
					message: fmt.Sprintf("The value for parameter MetricData.member.%d is not valid.", i+1)}
				datums = nil
				break
			}
		}
	}

	s.mu.Lock()
	req := Request{Datums: len(datums), BodyBytes: len(body), Compressed: compressed}
	if apiErr != nil {
		req.ErrorCode, req.Message = apiErr.code, apiErr.message
		s.stats.Rejected++
	} else {
		s.stats.Accepted++
		s.datums = append(s.datums, datums...)
	}
	s.requests = append(s.requests, req)
	onAccept, onReject := s.onAccept, s.onReject
	s.mu.Unlock()

	if apiErr != nil {
		if onReject != nil {
			onReject(req)
		}
		writeError(w, apiErr.status, apiErr.typ, apiErr.code+";Sender", apiErr.message)
		return
	}
	if onAccept != nil {
		onAccept(datums)
	}
	if faults.AnswerDelay > 0 {
		<-time.After(faults.AnswerDelay)
	}
	w.Header().Set("Smithy-Protocol", "rpc-v2-cbor")
	w.Header().Set("Content-Type", "application/cbor")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(cbor.Encode(cbor.Map{}))
}
