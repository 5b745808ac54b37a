package admissionextension // import "github.com/gpubuild/otelcol-gpubuild/extension/admissionextension"

import (
	"context"
	"net/http"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/extensionmiddleware"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/gpubuild/otelcol-gpubuild/extension/admissionextension/internal/admission"
)

type admissionExtension struct {
	gate   *admission.Gate
	logger *zap.Logger
}

var (
	_ extensionmiddleware.HTTPServer = (*admissionExtension)(nil)
	_ extensionmiddleware.GRPCServer = (*admissionExtension)(nil)
)

func (*admissionExtension) Start(context.Context, component.Host) error { return nil }
func (*admissionExtension) Shutdown(context.Context) error              { return nil }

// GetHTTPHandler waits for a place before the handler reads the body.
func (a *admissionExtension) GetHTTPHandler(context.Context) (extensionmiddleware.WrapHTTPHandlerFunc, error) {
	return func(_ context.Context, next http.Handler) (http.Handler, error) {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			release, err := a.gate.Acquire(r.Context())
			if err != nil {
				w.Header().Set("Retry-After", "1")
				http.Error(w, "admission: "+err.Error()+"; retry later", http.StatusServiceUnavailable)
				return
			}
			defer release()
			next.ServeHTTP(w, r)
		}), nil
	}, nil
}

// GetGRPCServerOptions: gRPC decodes a unary request before any
// interceptor, so a tap refuses a new stream at once when every place and
// every waiting place is taken (before its message is read), and the
// interceptor holds a place while the request goes through the pipeline.
func (a *admissionExtension) GetGRPCServerOptions(context.Context) ([]grpc.ServerOption, error) {
	return []grpc.ServerOption{
		grpc.InTapHandle(func(ctx context.Context, _ *tap.Info) (context.Context, error) {
			if a.gate.Full() {
				return nil, status.Error(codes.ResourceExhausted, "admission: "+admission.ErrBusy.Error())
			}
			return ctx, nil
		}),
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			release, err := a.gate.Acquire(ctx)
			if err != nil {
				return nil, status.Error(codes.ResourceExhausted, "admission: "+err.Error())
			}
			defer release()
			return handler(ctx, req)
		}),
	}, nil
}
