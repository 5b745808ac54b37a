// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package buildsim

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"os"

	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/grpc/credentials"
)

// Exporters are one process incarnation's exporters. Run creates a new set
// for each incarnation (a simulated restart starts new ones).
type Exporters struct {
	Span   sdktrace.SpanExporter
	Log    sdklog.Exporter
	Metric sdkmetric.Exporter
}

// ExporterFactory creates the exporters of one incarnation.
type ExporterFactory func(ctx context.Context, cfg Config) (Exporters, error)

// OTLPExporters is the default factory: the SDK's OTLP exporters over gRPC or
// HTTP/protobuf, with TLS and bearer-token options.
func OTLPExporters(ctx context.Context, cfg Config) (Exporters, error) {
	headers := maps.Clone(cfg.Headers)
	if headers == nil {
		headers = map[string]string{}
	}
	if cfg.BearerToken != "" {
		headers["Authorization"] = "Bearer " + cfg.BearerToken
	}
	tlsCfg, err := clientTLS(cfg)
	if err != nil {
		return Exporters{}, err
	}
	retry := cfg.RetryMaxElapsed > 0
	// The SDK's OTLP timeout bounds an export including its retries, so the
	// retry budget is added on top of the time one attempt may take.
	timeout := cfg.ExportTimeout + cfg.RetryMaxElapsed
	var ex Exporters
	switch cfg.Protocol {
	case ProtocolGRPC:
		rc := otlptracegrpc.RetryConfig{Enabled: retry, InitialInterval: cfg.RetryInitial, MaxInterval: cfg.RetryMaxElapsed / 4, MaxElapsedTime: cfg.RetryMaxElapsed}
		topts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(cfg.Endpoint), otlptracegrpc.WithHeaders(headers), otlptracegrpc.WithTimeout(timeout), otlptracegrpc.WithRetry(rc)}
		lopts := []otlploggrpc.Option{otlploggrpc.WithEndpoint(cfg.Endpoint), otlploggrpc.WithHeaders(headers), otlploggrpc.WithTimeout(timeout), otlploggrpc.WithRetry(otlploggrpc.RetryConfig(rc))}
		mopts := []otlpmetricgrpc.Option{otlpmetricgrpc.WithEndpoint(cfg.Endpoint), otlpmetricgrpc.WithHeaders(headers), otlpmetricgrpc.WithTimeout(timeout), otlpmetricgrpc.WithRetry(otlpmetricgrpc.RetryConfig(rc))}
		if tlsCfg == nil {
			topts = append(topts, otlptracegrpc.WithInsecure())
			lopts = append(lopts, otlploggrpc.WithInsecure())
			mopts = append(mopts, otlpmetricgrpc.WithInsecure())
		} else {
			creds := credentials.NewTLS(tlsCfg)
			topts = append(topts, otlptracegrpc.WithTLSCredentials(creds))
			lopts = append(lopts, otlploggrpc.WithTLSCredentials(creds))
			mopts = append(mopts, otlpmetricgrpc.WithTLSCredentials(creds))
		}
		if ex.Span, err = otlptracegrpc.New(ctx, topts...); err != nil {
			return Exporters{}, err
		}
		if ex.Log, err = otlploggrpc.New(ctx, lopts...); err != nil {
			return Exporters{}, err
		}
		if ex.Metric, err = otlpmetricgrpc.New(ctx, mopts...); err != nil {
			return Exporters{}, err
		}
	case ProtocolHTTP:
		rc := otlptracehttp.RetryConfig{Enabled: retry, InitialInterval: cfg.RetryInitial, MaxInterval: cfg.RetryMaxElapsed / 4, MaxElapsedTime: cfg.RetryMaxElapsed}
		topts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(cfg.Endpoint), otlptracehttp.WithHeaders(headers), otlptracehttp.WithTimeout(timeout), otlptracehttp.WithRetry(rc)}
		lopts := []otlploghttp.Option{otlploghttp.WithEndpoint(cfg.Endpoint), otlploghttp.WithHeaders(headers), otlploghttp.WithTimeout(timeout), otlploghttp.WithRetry(otlploghttp.RetryConfig(rc))}
		mopts := []otlpmetrichttp.Option{otlpmetrichttp.WithEndpoint(cfg.Endpoint), otlpmetrichttp.WithHeaders(headers), otlpmetrichttp.WithTimeout(timeout), otlpmetrichttp.WithRetry(otlpmetrichttp.RetryConfig(rc))}
		if tlsCfg == nil {
			topts = append(topts, otlptracehttp.WithInsecure())
			lopts = append(lopts, otlploghttp.WithInsecure())
			mopts = append(mopts, otlpmetrichttp.WithInsecure())
		} else {
			topts = append(topts, otlptracehttp.WithTLSClientConfig(tlsCfg))
			lopts = append(lopts, otlploghttp.WithTLSClientConfig(tlsCfg))
			mopts = append(mopts, otlpmetrichttp.WithTLSClientConfig(tlsCfg))
		}
		if ex.Span, err = otlptracehttp.New(ctx, topts...); err != nil {
			return Exporters{}, err
		}
		if ex.Log, err = otlploghttp.New(ctx, lopts...); err != nil {
			return Exporters{}, err
		}
		if ex.Metric, err = otlpmetrichttp.New(ctx, mopts...); err != nil {
			return Exporters{}, err
		}
	default:
		return Exporters{}, fmt.Errorf("protocol: unsupported %q", cfg.Protocol)
	}
	return ex, nil
}

// clientTLS is nil (plaintext) unless a CA file or skip-verify is set.
func clientTLS(cfg Config) (*tls.Config, error) {
	if cfg.CAFile == "" && !cfg.InsecureSkipVerify {
		return nil, nil
	}
	t := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: cfg.ServerName, InsecureSkipVerify: cfg.InsecureSkipVerify} //nolint:gosec // opt-in for self-signed test servers
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, errors.New("ca_file: no PEM certificate found")
		}
		t.RootCAs = pool
	}
	return t, nil
}
