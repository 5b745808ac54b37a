// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package admissionextension

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/mem"
)

// receivedMetrics is an OTLP metrics service that keeps a copy of what it
// receives when keep is set, and drops it otherwise.
type receivedMetrics struct {
	pmetricotlp.UnimplementedGRPCServer
	keep bool
	got  chan pmetric.Metrics
}

func (r *receivedMetrics) Export(_ context.Context, req pmetricotlp.ExportRequest) (pmetricotlp.ExportResponse, error) {
	if r.keep {
		md := pmetric.NewMetrics()
		req.Metrics().CopyTo(md)
		r.got <- md
	}
	return pmetricotlp.NewExportResponse(), nil
}

// grpcServerOptions are what the extension made from cfg gives a gRPC server.
func grpcServerOptions(t *testing.T, cfg *Config) []grpc.ServerOption {
	t.Helper()
	ext, err := NewFactory().Create(context.Background(), extensiontest.NewNopSettings(NewFactory().Type()), cfg)
	require.NoError(t, err)
	opts, err := ext.(*admissionExtension).GetGRPCServerOptions(context.Background())
	require.NoError(t, err)
	return opts
}

// serve starts a gRPC server with opts, the metrics service svc and the
// health service, and returns a connection to it.
func serve(t *testing.T, svc pmetricotlp.GRPCServer, opts ...grpc.ServerOption) *grpc.ClientConn {
	t.Helper()
	srv := grpc.NewServer(opts...)
	pmetricotlp.RegisterGRPCServer(srv, svc)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// largeMessages admits the 1.2 MiB requests below.
var largeMessages = grpc.MaxRecvMsgSize(4 << 20)

// gaugeOfSize is a request of one gauge whose points make it at least
// bytes long once serialized.
func gaugeOfSize(bytes int) pmetric.Metrics {
	md := pmetric.NewMetrics()
	m := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("gpu.utilization")
	dps := m.SetEmptyGauge().DataPoints()
	sizer := &pmetric.ProtoMarshaler{}
	for i := 0; sizer.MetricsSize(md) < bytes; i++ {
		for range 256 {
			dp := dps.AppendEmpty()
			dp.SetDoubleValue(float64(i))
			dp.Attributes().PutStr("gpu.uuid", fmt.Sprintf("GPU-%08d", dps.Len()))
		}
	}
	return md
}

// Requests decode whole through the admission's codec, in one HTTP/2 frame
// or in many, and other services' messages still decode.
func TestAdmittedRequestsDecodeWhole(t *testing.T) {
	svc := &receivedMetrics{keep: true, got: make(chan pmetric.Metrics, 1)}
	conn := serve(t, svc, append(grpcServerOptions(t, createDefaultConfig().(*Config)), largeMessages)...)
	client := pmetricotlp.NewGRPCClient(conn)
	marshaler := &pmetric.ProtoMarshaler{}
	for _, size := range []int{1, 1200 << 10} {
		sent := gaugeOfSize(size)
		_, err := client.Export(context.Background(), pmetricotlp.NewExportRequestFromMetrics(sent))
		require.NoError(t, err)
		want, err := marshaler.MarshalMetrics(sent)
		require.NoError(t, err)
		got, err := marshaler.MarshalMetrics(<-svc.got)
		require.NoError(t, err)
		assert.Equal(t, want, got, "a request of %d bytes", len(want))
	}

	resp, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	assert.Equal(t, healthpb.HealthCheckResponse_SERVING, resp.GetStatus())
}

// rawCodec sends bytes as they are: the client's own buffers stay out of
// the measure below.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	p, ok := v.(*[]byte)
	if !ok {
		return errors.New("rawCodec: not *[]byte")
	}
	*p = data.Materialize()
	return nil
}

func (rawCodec) Name() string { return "proto" }

// heapKeptAfterOneCollection sends a serialized request and returns how
// much more heap is live after one collection than before the request.
func heapKeptAfterOneCollection(t *testing.T, conn *grpc.ClientConn, request []byte) int64 {
	t.Helper()
	send := func() {
		var answer []byte
		require.NoError(t, conn.Invoke(context.Background(), "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export",
			&request, &answer, grpc.ForceCodecV2(rawCodec{})))
	}
	send() // the connection and its frame buffers
	// Only the collections below: one started by the request's own
	// allocations would empty the pools early.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC() // empties sync.Pools (kept for one collection more)
	runtime.ReadMemStats(&before)
	send()
	runtime.GC()
	runtime.ReadMemStats(&after)
	return int64(after.HeapAlloc) - int64(before.HeapAlloc)
}

// A decoded request leaves no rounded-up copy behind: pdata's codec, the
// control, keeps the 4 MiB buffer it copied a 1.2 MiB message into through
// the next collection; the admission's codec copies it into a buffer of its
// size that is garbage once the request is decoded.
func TestDecodedRequestsLeaveNoBufferBehind(t *testing.T) {
	request, err := (&pmetric.ProtoMarshaler{}).MarshalMetrics(gaugeOfSize(1200 << 10))
	require.NoError(t, err)

	// The control: pdata's own codec keeps a pooled buffer of the message's
	// size, which is why requestCodec exists.
	control := heapKeptAfterOneCollection(t, serve(t, &receivedMetrics{}, largeMessages), request)
	if raceEnabled {
		t.Logf("control not checked under the race detector, which drops pooled buffers at random (kept %d bytes)", control)
	} else {
		require.Greater(t, control, int64(3<<20), "pdata's codec no longer keeps a pooled buffer: requestCodec may be unnecessary")
	}

	kept := heapKeptAfterOneCollection(t, serve(t, &receivedMetrics{}, append(grpcServerOptions(t, createDefaultConfig().(*Config)), largeMessages)...), request)
	// gRPC's own frame buffers (the message in 16 KiB pieces) may stay in
	// its pool either way.
	assert.Less(t, kept, int64(len(request)+512<<10), "heap kept after decoding a %d-byte request", len(request))
}

// pieces cuts msg into gRPC's 16 KiB frame pieces, as a message read from
// the wire arrives in the codec.
func pieces(msg []byte) mem.BufferSlice {
	var s mem.BufferSlice
	for len(msg) > 0 {
		n := min(len(msg), 16<<10)
		s = append(s, mem.SliceBuffer(msg[:n]))
		msg = msg[n:]
	}
	return s
}

// recordingRequest is a protoUnmarshaler that checks the bytes it is given
// against want, allocating nothing.
type recordingRequest struct {
	want []byte
	ok   bool
}

func (r *recordingRequest) UnmarshalProto(b []byte) error {
	r.ok = bytes.Equal(b, r.want)
	return nil
}

// A message in several pieces is copied into a kept buffer: requests of
// an SDK batch's size, one after another, allocate no copy of their own,
// and each is decoded from its own bytes (not a longer earlier message's).
func TestRequestsReuseTheMessageBuffer(t *testing.T) {
	c := newRequestCodec(1)
	sizes := []int{300 << 10, 20 << 10, 200 << 10, 300<<10 + 1}
	msgs := make([][]byte, len(sizes))
	for i, n := range sizes {
		msgs[i] = bytes.Repeat([]byte{byte('a' + i)}, n)
	}
	for _, m := range msgs {
		r := &recordingRequest{want: m}
		require.NoError(t, c.Unmarshal(pieces(m), r))
		require.True(t, r.ok, "a %d-byte message decoded from other bytes", len(m))
	}

	slices := make([]mem.BufferSlice, len(msgs))
	for i, m := range msgs {
		slices[i] = pieces(m)
	}
	reqs := make([]recordingRequest, len(msgs))
	for i, m := range msgs {
		reqs[i].want = m
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const rounds = 50
	for range rounds {
		for i := range msgs {
			require.NoError(t, c.Unmarshal(slices[i], &reqs[i]))
			require.True(t, reqs[i].ok)
		}
	}
	runtime.ReadMemStats(&after)
	perRequest := (after.TotalAlloc - before.TotalAlloc) / (rounds * uint64(len(msgs)))
	assert.Less(t, perRequest, uint64(1<<10), "bytes allocated per request of 20-300 KiB")
}

// The kept buffers stay within their bounds: none larger than
// maxKeptBufferBytes, all together at most maxKeptBytes, no more than the
// requests in flight, the smallest giving way to a larger one.
func TestMessageBuffersKeepBounds(t *testing.T) {
	p := newMessageBuffers(100, 250, 3)
	get := func(n int) *[]byte {
		b := p.Get(n)
		require.Len(t, *b, n)
		return b
	}
	huge := get(101)
	p.Put(huge)
	assert.Empty(t, p.kept, "a buffer over the per-buffer bound is not kept")

	a, b, c := get(60), get(90), get(100)
	p.Put(a)
	p.Put(b)
	assert.Equal(t, 150, p.total)
	p.Put(c) // 250: fits
	assert.Equal(t, 250, p.total)
	d := get(80) // takes b (90) or c (100)
	assert.GreaterOrEqual(t, cap(*d), 80)
	assert.LessOrEqual(t, p.total, 250)
	p.Put(d)
	e := p.Get(40)
	f := p.Get(40)
	g := p.Get(40)
	p.Put(g)
	p.Put(f)
	p.Put(e)
	assert.LessOrEqual(t, p.total, 250)
	for _, k := range p.kept {
		assert.LessOrEqual(t, cap(*k), 100)
	}

	// No more buffers than requests in flight: the larger stays.
	one := newMessageBuffers(1<<10, 1<<10, 1)
	small, large := one.Get(100), one.Get(300)
	one.Put(small)
	one.Put(large)
	require.Len(t, one.kept, 1)
	assert.Equal(t, 300, cap(*one.kept[0]))
	one.Put(one.Get(50))
	require.Len(t, one.kept, 1)
	assert.Equal(t, 300, cap(*one.kept[0]), "the kept buffer served the smaller message")

	// Reuse: the same backing array comes back.
	q := newMessageBuffers(1<<10, 1<<10, 1)
	first := q.Get(500)
	q.Put(first)
	again := q.Get(400)
	assert.Same(t, &(*first)[0], &(*again)[0])
	assert.Len(t, *again, 400)
}
