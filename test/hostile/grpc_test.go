// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package hostile

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
)

// The gRPC side of TestParallelMaximalRequestsStayUnderThePodLimit: 32
// clients, each on its own connection, send a maximal OTLP/gRPC request at
// once, each sent again after the delay asked for until accepted. The
// admission middleware takes a place before a message is read (gRPC
// decodes before interceptors run), so the sidecar's peak RSS stays under
// the pod's limit; every refusal is retryable (UNAVAILABLE, from admission
// for a place or for the heap; RESOURCE_EXHAUSTED tolerated), every request is
// accepted in the end and everything reaches CloudWatch exactly once.
func TestParallelMaximalGRPCRequestsStayUnderThePodLimit(t *testing.T) {
	limitMiB := podMemoryLimitMiB(t)
	cw, s := startPodSidecar(t)
	// The gRPC bound is max_recv_msg_size_mib (2 MiB), the same as HTTP's.
	body, points := maximalRequest(t, defaultMaxRequestBytes(t))
	req := pmetricotlp.NewExportRequest()
	require.NoError(t, req.UnmarshalProto(body))
	t.Logf("request: %d bytes, %d points", len(body), points)

	peakKiB := binarytest.SampleMem(s.Pid(), 20*time.Millisecond)

	// With the place taken only after decoding, 32 connections × 3 rounds
	// (no retries) peaked at 420 MiB.
	const clients, rounds = 32, 1
	target := fmt.Sprintf("127.0.0.1:%d", s.grpcPort)
	var accepted, refused atomic.Int64
	var byCode sync.Map // code -> *atomic.Int64
	var unexpected sync.Map
	var wg sync.WaitGroup
	for range clients {
		conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close() })
		client := pmetricotlp.NewGRPCClient(conn)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				// As an OTLP client does: a refused request is sent again
				// after the delay the server asks for.
				for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
					_, err := client.Export(ctx, req)
					cancel()
					c, _ := byCode.LoadOrStore(status.Code(err).String(), new(atomic.Int64))
					c.(*atomic.Int64).Add(1)
					if code := status.Code(err); code != codes.ResourceExhausted && code != codes.Unavailable {
						if err == nil {
							accepted.Add(1)
						} else {
							unexpected.Store(err.Error(), true)
						}
						break
					}
					refused.Add(1)
					time.Sleep(retryDelay(err))
				}
			}
		}()
	}
	wg.Wait()

	want := int(accepted.Load()) * points
	delivered := binarytest.Eventually(3*time.Minute, func() bool { return len(cw.WorkloadDatums()) >= want })

	peakMiB := peakKiB().HWM / 1024
	t.Logf("accepted %d requests (%d refusals on the way) of %d; peak RSS %d MiB (pod limit %d MiB); %d datums delivered",
		accepted.Load(), refused.Load(), clients*rounds, peakMiB, limitMiB, len(cw.WorkloadDatums()))
	byCode.Range(func(k, v any) bool { t.Logf("%s: %d", k, v.(*atomic.Int64).Load()); return true })
	unexpected.Range(func(k, _ any) bool { t.Errorf("unexpected answer: %v", k); return true })
	assert.Equal(t, int64(clients*rounds), accepted.Load(), "every request accepted in the end")
	assert.Less(t, peakMiB, limitMiB, "peak RSS under the pod's memory limit")
	assert.True(t, delivered, "what was accepted reaches CloudWatch")
	assert.Len(t, cw.WorkloadDatums(), want, "nothing accepted is lost or sent twice")
	assert.True(t, binarytest.Healthy(s.health))
}

// retryDelay is the delay a refusal asks for (RetryInfo), or one second.
func retryDelay(err error) time.Duration {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.RetryInfo); ok {
			return info.GetRetryDelay().AsDuration()
		}
	}
	return time.Second
}
