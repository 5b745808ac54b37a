// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchtest

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/aws/smithy-go/encoding/cbor"
)

// readBody reads and, when gzip-encoded, decompresses the body. CloudWatch
// limits a request to 1 MB; the limit is applied to the decompressed body,
// which is the stricter reading.
func readBody(r *http.Request, limit int) ([]byte, bool, *apiError) {
	tooLarge := &apiError{status: http.StatusRequestEntityTooLarge, code: "RequestEntityTooLarge", typ: "RequestEntityTooLarge",
		message: fmt.Sprintf("Request size exceeded %d bytes", limit)}
	raw, err := io.ReadAll(io.LimitReader(r.Body, 16*MaxRequestBytes))
	if err != nil {
		return nil, false, &apiError{status: http.StatusBadRequest, code: "MalformedInput", typ: "MalformedInput", message: err.Error()}
	}
	compressed := r.Header.Get("Content-Encoding") == "gzip"
	if compressed {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, true, &apiError{status: http.StatusBadRequest, code: "MalformedInput", typ: "MalformedInput", message: "bad gzip body"}
		}
		raw, err = io.ReadAll(io.LimitReader(zr, int64(limit)+1))
		if err != nil {
			return nil, true, &apiError{status: http.StatusBadRequest, code: "MalformedInput", typ: "MalformedInput", message: "bad gzip body"}
		}
	}
	if len(raw) > limit {
		return raw, compressed, tooLarge
	}
	return raw, compressed, nil
}

// writeError answers like CloudWatch over RPC v2 CBOR: the error shape in
// __type and, because CloudWatch is awsQuery-compatible, the query error
// code in X-Amzn-Query-Error (the SDK reports that code).
func writeError(w http.ResponseWriter, status int, typ, queryError, message string) {
	w.Header().Set("Smithy-Protocol", "rpc-v2-cbor")
	w.Header().Set("Content-Type", "application/cbor")
	if queryError != "" {
		w.Header().Set("X-Amzn-Query-Error", queryError)
	}
	w.WriteHeader(status)
	_, _ = w.Write(cbor.Encode(cbor.Map{"__type": cbor.String(typ), "message": cbor.String(message)}))
}

// dropConnection closes the connection without writing an answer.
func dropConnection(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0) // reset rather than a clean close
	}
	_ = conn.Close()
}

// listen is net.Listen, except that port 0 is served from below the
// kernel's ephemeral range (where the kernel picks the local ports of
// outgoing connections).
func listen(addr string) (net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port != "0" {
		return net.Listen("tcp", addr)
	}
	low := ephemeralLow()
	const first = 10000
	if low <= first+1000 {
		return net.Listen("tcp", addr)
	}
	start := first + rand.IntN(low-first)
	for i := range low - first {
		p := first + (start-first+i)%(low-first)
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p)))
		if err == nil {
			return ln, nil
		}
	}
	return net.Listen("tcp", addr)
}

// ephemeralLow is the lowest local port the kernel gives outgoing
// connections (Linux); 0 where that cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.Atoi(f[0])
	return n
}
