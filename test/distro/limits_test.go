// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package distro

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
)

// bigMetrics is an OTLP request of about size bytes: gauges with a long
// attribute each.
func bigMetrics(size int) pmetricotlp.ExportRequest {
	md := pmetric.NewMetrics()
	ms := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics()
	pad := strings.Repeat("x", 1000)
	for i := 0; i < size/1050; i++ {
		dp := ms.AppendEmpty()
		dp.SetName(fmt.Sprintf("limits.big.%d", i))
		p := dp.SetEmptyGauge().DataPoints().AppendEmpty()
		p.SetDoubleValue(1)
		p.Attributes().PutStr("pad", pad)
	}
	return pmetricotlp.NewExportRequestFromMetrics(md)
}

// Requests past the size bound are refused before they are decoded, over
// both protocols, and the sidecar goes on serving the next one.
func TestOversizedRequestsRefused(t *testing.T) {
	s := startSidecar(t)
	req := bigMetrics(5 << 20) // over the 2 MiB default
	body, err := req.MarshalProto()
	require.NoError(t, err)
	require.Greater(t, len(body), 4<<20)

	resp, err := http.Post(fmt.Sprintf("http://127.0.0.1:%d/v1/metrics", s.httpPort), "application/x-protobuf", bytes.NewReader(body))
	if err == nil { // the server may also close the connection mid-body
		msg, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		// The OTLP receiver answers a body past max_request_body_size with
		// 400 and the reader's error, which an SDK does not retry.
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "OTLP/HTTP past max_request_body_size")
		assert.Contains(t, string(msg), "request body too large")
	}

	conn, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", s.grpcPort), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	client := pmetricotlp.NewGRPCClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = client.Export(ctx, req, grpc.MaxCallSendMsgSize(64<<20))
	assert.Equal(t, codes.ResourceExhausted, status.Code(err), "OTLP/gRPC past max_recv_msg_size_mib: %v", err)

	_, err = client.Export(ctx, bigMetrics(64<<10))
	require.NoError(t, err, "a request within the bound is still accepted")
	require.True(t, s.healthy())
}

// Idle, half-sent and kept-alive connections are closed by the sidecar
// once their timeouts pass, so a flood of them cannot hold its memory.
func TestIdleConnectionsClosed(t *testing.T) {
	s := startSidecar(t,
		"GPUBUILD_OTLP_IDLE_TIMEOUT=1s",
		"GPUBUILD_OTLP_READ_HEADER_TIMEOUT=1s",
	)
	addr := fmt.Sprintf("127.0.0.1:%d", s.httpPort)
	const each = 100
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	dial := func(send string) {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		if send != "" {
			_, err = io.WriteString(c, send)
			require.NoError(t, err)
		}
		conns = append(conns, c)
	}
	for range each {
		dial("")                                               // nothing sent
		dial("POST /v1/metrics HTTP/1.1\r\nHost: sidecar\r\n") // headers never finished
		dial("GET /v1/metrics HTTP/1.1\r\nHost: sidecar\r\n\r\n")
	}

	// Every connection ends on the sidecar's side: a read gives EOF (or a
	// reset) well before the test's own deadline.
	var wg sync.WaitGroup
	closed := make(chan bool, len(conns))
	for _, c := range conns {
		wg.Add(1)
		go func(c net.Conn) {
			defer wg.Done()
			_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
			_, err := io.Copy(io.Discard, c)
			closed <- err == nil || !errors.Is(err, os.ErrDeadlineExceeded)
		}(c)
	}
	wg.Wait()
	close(closed)
	n := 0
	for ok := range closed {
		if ok {
			n++
		}
	}
	assert.Equal(t, len(conns), n, "connections the sidecar closed")

	// A gRPC connection with no stream is closed after the idle timeout too.
	conn, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", s.grpcPort), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = pmetricotlp.NewGRPCClient(conn).Export(ctx, bigMetrics(4<<10))
	require.NoError(t, err)
	require.Equal(t, connectivity.Ready, conn.GetState())
	require.True(t, binarytest.Eventually(15*time.Second, func() bool { return conn.GetState() == connectivity.Idle }),
		"the sidecar did not close the idle gRPC connection (state %v)", conn.GetState())
	require.True(t, s.healthy())
}
