// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package exposedlisteners

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func otlp(grpc, http map[string]any) map[string]any {
	return map[string]any{"receivers": map[string]any{
		"otlp": map[string]any{"protocols": map[string]any{"grpc": grpc, "http": http}},
	}}
}

func TestFind(t *testing.T) {
	tests := []struct {
		name string
		cfg  map[string]any
		want []Listener
	}{
		{"loopback IPv4", otlp(map[string]any{"endpoint": "127.0.0.1:4317"}, map[string]any{"endpoint": "127.0.0.1:4318"}), nil},
		{"loopback IPv6 and localhost", otlp(map[string]any{"endpoint": "[::1]:4317"}, map[string]any{"endpoint": "localhost:4318"}), nil},
		{"every interface", otlp(map[string]any{"endpoint": "0.0.0.0:4317"}, map[string]any{"endpoint": ":4318"}), []Listener{
			{"otlp", "grpc", "0.0.0.0:4317"}, {"otlp", "http", ":4318"},
		}},
		{"TLS on one, auth on the other", otlp(
			map[string]any{"endpoint": "0.0.0.0:4317", "tls": map[string]any{"cert_file": "c"}},
			map[string]any{"endpoint": "0.0.0.0:4318", "auth": map[string]any{"authenticator": "bearertokenauth"}}), nil},
		{"an address of this machine", otlp(map[string]any{"endpoint": "10.0.0.7:4317"}, nil), []Listener{{"otlp", "grpc", "10.0.0.7:4317"}}},
		{"a receiver with one endpoint", map[string]any{"receivers": map[string]any{
			"zipkin": map[string]any{"endpoint": "0.0.0.0:9411"},
		}}, []Listener{{"zipkin", "", "0.0.0.0:9411"}}},
		{"unexpanded and scrapers", map[string]any{"receivers": map[string]any{
			"otlp": map[string]any{"protocols": map[string]any{"grpc": map[string]any{"endpoint": "${env:HOST}:4317"}}},
			"nvml": map[string]any{"collection_interval": "10s"},
		}}, nil},
		{"unix sockets, a file and an abstract one", otlp(
			map[string]any{"endpoint": "@otelcol-gpubuild-remote-write-0123", "transport": "unix"},
			map[string]any{"endpoint": "/run/otelcol/otlp.sock", "transport": "unix"}), nil},
		{"no receivers", map[string]any{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Find(tt.cfg))
		})
	}
}

func TestConverterWarnsAndChangesNothing(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	conv := NewFactory().Create(confmap.ConverterSettings{Logger: zap.New(core)})
	cfg := otlp(map[string]any{"endpoint": "0.0.0.0:4317"}, map[string]any{"endpoint": "127.0.0.1:4318"})
	conf := confmap.NewFromStringMap(cfg)
	before := conf.ToStringMap()

	require.NoError(t, conv.Convert(context.Background(), conf))
	assert.Equal(t, before, conf.ToStringMap(), "the configuration is left as it is")
	require.Equal(t, 1, logs.Len())
	entry := logs.All()[0]
	assert.Contains(t, entry.Message, "without TLS or authentication")
	assert.Equal(t, "0.0.0.0:4317", entry.ContextMap()["endpoint"])
	assert.Equal(t, "grpc", entry.ContextMap()["protocol"])
}
