// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package admissionextension // import "github.com/gpubuild/otelcol-gpubuild/extension/admissionextension"

import (
	"context"
	"errors"
	"net/http"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/extensionmiddleware"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/gpubuild/otelcol-gpubuild/extension/admissionextension/internal/admission"
	"github.com/gpubuild/otelcol-gpubuild/extension/admissionextension/internal/memory"
	"github.com/gpubuild/otelcol-gpubuild/extension/admissionextension/internal/metadata"
)

var (
	refusedBusy   = metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", "busy")))
	refusedMemory = metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", "memory")))
)

type admissionExtension struct {
	gate        *admission.Gate
	maxInFlight int
	logger      *zap.Logger
	telemetry   *metadata.TelemetryBuilder
	// memory is nil without memory.limit_mib.
	memory *memory.Guard
}

var (
	_ extensionmiddleware.HTTPServer = (*admissionExtension)(nil)
	_ extensionmiddleware.GRPCServer = (*admissionExtension)(nil)
)

func (*admissionExtension) Start(context.Context, component.Host) error { return nil }
func (a *admissionExtension) Shutdown(context.Context) error {
	a.telemetry.Shutdown()
	return nil
}

// heapHigh reads the heap if due (only ever on a request's arrival).
func (a *admissionExtension) heapHigh(ctx context.Context) bool {
	if a.memory == nil || !a.memory.Refuse() {
		return false
	}
	a.telemetry.AdmissionRefusedRequests.Add(ctx, 1, refusedMemory)
	return true
}

// GetHTTPHandler waits for a place before the handler reads the body, then
// checks the heap (a request that waited sees the heap of its turn).
func (a *admissionExtension) GetHTTPHandler(context.Context) (extensionmiddleware.WrapHTTPHandlerFunc, error) {
	return func(_ context.Context, next http.Handler) (http.Handler, error) {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			release, err := a.gate.Acquire(r.Context())
			if err != nil {
				if errors.Is(err, admission.ErrBusy) {
					a.telemetry.AdmissionRefusedRequests.Add(r.Context(), 1, refusedBusy)
				}
				w.Header().Set("Retry-After", "1")
				http.Error(w, "admission: "+err.Error()+"; retry later", http.StatusServiceUnavailable)
				return
			}
			defer release()
			if a.heapHigh(r.Context()) {
				w.Header().Set("Retry-After", "1")
				http.Error(w, "admission: "+errHeapHigh+"; retry later", http.StatusServiceUnavailable)
				return
			}
			next.ServeHTTP(w, r)
		}), nil
	}, nil
}

// GetGRPCServerOptions: gRPC reads and decodes a unary request before any
// interceptor runs, and a decoded request waiting for a place would hold
// its memory while it waits. So the place is taken in the tap, before the
// message is read, and held until the stream ends (its context is then
// cancelled, whatever the outcome). The tap runs on the connection's
// reader, which must not block (other streams of the connection, maybe the
// one holding the place, would stall): a request that finds no place free
// is refused at once with UNAVAILABLE and a retry delay, which OTLP
// clients retry; so is one that arrives while the heap is high. An
// admitted message is decoded from a copy of its own
// size (requestCodec), not from a pooled buffer of the next larger tier.
// The admitted streams run on max_in_flight long-lived goroutines instead
// of one new goroutine each: a request's stack grows through decoding, the
// pipeline and the state's write, and a new goroutine's stack grows (is
// copied) anew for every request (10 % of the sidecar's CPU at 2,000
// spans/s); a worker's stays grown. Streams beyond them (a health check
// beside a request) get a goroutine of their own, as before.
func (a *admissionExtension) GetGRPCServerOptions(context.Context) ([]grpc.ServerOption, error) {
	return []grpc.ServerOption{
		grpc.ForceServerCodecV2(newRequestCodec(a.maxInFlight)),
		grpc.NumStreamWorkers(uint32(a.maxInFlight)), //nolint:gosec // Validate: positive; a count of requests
		grpc.InTapHandle(func(ctx context.Context, _ *tap.Info) (context.Context, error) {
			if a.heapHigh(ctx) {
				return nil, unavailable(errHeapHigh)
			}
			release, ok := a.gate.TryAcquire()
			if !ok {
				a.telemetry.AdmissionRefusedRequests.Add(ctx, 1, refusedBusy)
				return nil, unavailable(admission.ErrBusy.Error())
			}
			context.AfterFunc(ctx, release)
			return ctx, nil
		}),
	}, nil
}

// errHeapHigh is the message of a refusal for memory (memory_limiter's word).
const errHeapHigh = "data refused due to high memory usage"

// unavailable is the gRPC refusal: UNAVAILABLE is retried by every OTLP
// client; RetryInfo asks for a pause first.
func unavailable(reason string) error {
	msg := "admission: " + reason + "; retry later"
	st, err := status.New(codes.Unavailable, msg).WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Second)})
	if err != nil {
		return status.Error(codes.Unavailable, msg)
	}
	return st.Err()
}
