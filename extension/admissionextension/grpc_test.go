// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package admissionextension

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// blockingMetrics is an OTLP metrics service whose Export waits for unblock.
type blockingMetrics struct {
	pmetricotlp.UnimplementedGRPCServer
	entered chan struct{}
	unblock chan struct{}
}

func (b *blockingMetrics) Export(context.Context, pmetricotlp.ExportRequest) (pmetricotlp.ExportResponse, error) {
	b.entered <- struct{}{}
	<-b.unblock
	return pmetricotlp.NewExportResponse(), nil
}

// A gRPC request takes its place before its message is read and keeps it
// until the stream ends; one that finds no free place is refused at once
// with UNAVAILABLE and a retry delay, never reaching the service; a place
// is given back however the stream ends (answered, or failed before the
// handler on a message over the size bound).
func TestGRPCRequestsTakeAPlaceBeforeTheirMessageIsRead(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.MaxInFlight = 1
	svc := &blockingMetrics{entered: make(chan struct{}, 4), unblock: make(chan struct{})}
	conn := serve(t, svc, append(grpcServerOptions(t, cfg), grpc.MaxRecvMsgSize(1<<10))...)
	client := pmetricotlp.NewGRPCClient(conn)
	export := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := client.Export(ctx, pmetricotlp.NewExportRequest())
		return err
	}

	first := make(chan error, 1)
	go func() { first <- export() }()
	<-svc.entered
	err := export()
	st := status.Convert(err)
	assert.Equal(t, codes.Unavailable, st.Code(), "refused at once: %v", err)
	require.Len(t, st.Details(), 1)
	info, ok := st.Details()[0].(*errdetails.RetryInfo)
	require.True(t, ok, "with a retry delay")
	assert.Equal(t, time.Second, info.GetRetryDelay().AsDuration())
	assert.Empty(t, svc.entered, "the refused request never reached the service")
	close(svc.unblock)
	require.NoError(t, <-first)

	// The place came back when the first stream ended.
	require.Eventually(t, func() bool { return export() == nil }, 10*time.Second, 10*time.Millisecond)
	<-svc.entered

	// A message over the size bound fails before the handler; its place
	// still comes back.
	big := pmetricotlp.NewExportRequest()
	dps := big.Metrics().ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty().SetEmptyGauge().DataPoints()
	for range 200 {
		dps.AppendEmpty().SetIntValue(1)
	}
	_, err = client.Export(context.Background(), big)
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "over the size bound: %v", err)
	require.Eventually(t, func() bool { return export() == nil }, 10*time.Second, 10*time.Millisecond)
}

// goroutineRecorder is an OTLP metrics service that notes the goroutine
// each Export runs on.
type goroutineRecorder struct {
	pmetricotlp.UnimplementedGRPCServer
	ids []string
}

func (g *goroutineRecorder) Export(context.Context, pmetricotlp.ExportRequest) (pmetricotlp.ExportResponse, error) {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	// "goroutine 123 [running]:..."
	g.ids = append(g.ids, strings.Fields(string(buf))[1])
	return pmetricotlp.NewExportResponse(), nil
}

// Admitted requests run one after another on the same long-lived
// goroutine, whose stack stays grown, not on a new goroutine each (the
// control: a server without the extension's options).
func TestAdmittedRequestsRunOnWorkers(t *testing.T) {
	run := func(opts ...grpc.ServerOption) []string {
		svc := &goroutineRecorder{}
		client := pmetricotlp.NewGRPCClient(serve(t, svc, opts...))
		for range 5 {
			_, err := client.Export(context.Background(), pmetricotlp.NewExportRequest())
			require.NoError(t, err)
		}
		return svc.ids
	}
	control := run()
	require.Len(t, control, 5)
	assert.Len(t, distinct(control), 5, "without workers each request gets a goroutine of its own")

	cfg := createDefaultConfig().(*Config)
	cfg.MaxInFlight = 1
	ids := run(grpcServerOptions(t, cfg)...)
	require.Len(t, ids, 5)
	assert.Len(t, distinct(ids), 1, "requests on one worker: %v", ids)
}

func distinct(s []string) map[string]bool {
	m := map[string]bool{}
	for _, v := range s {
		m[v] = true
	}
	return m
}
