// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package exposedlisteners is a confmap converter that warns, once at start,
// about every receiver listening beyond the loopback interface with neither
// TLS nor an authenticator: anyone who can reach the port can then send data
// that is billed and counted as the build service's own. The configuration
// is left as it is (opening a listener is a deployer's decision, for example
// GPUBUILD_LISTEN_HOST=0.0.0.0 when the service runs in another network
// namespace); the warning makes the decision visible.
package exposedlisteners // import "github.com/gpubuild/otelcol-gpubuild/internal/confmap/exposedlisteners"

import (
	"context"
	"net"
	"slices"
	"strings"

	"go.opentelemetry.io/collector/confmap"
	"go.uber.org/zap"
)

// NewFactory returns the converter factory that ocb wires into the distribution.
func NewFactory() confmap.ConverterFactory {
	return confmap.NewConverterFactory(func(set confmap.ConverterSettings) confmap.Converter {
		return converter{logger: set.Logger}
	})
}

type converter struct{ logger *zap.Logger }

func (c converter) Convert(_ context.Context, conf *confmap.Conf) error {
	if c.logger == nil {
		return nil
	}
	for _, l := range Find(conf.ToStringMap()) {
		c.logger.Warn("A receiver listens beyond loopback without TLS or authentication: anyone who can reach it can send data in the build service's name. Add tls and auth to it, or keep it on 127.0.0.1.",
			zap.String("receiver", l.Receiver), zap.String("protocol", l.Protocol), zap.String("endpoint", l.Endpoint))
	}
	return nil
}

// Listener is a receiver's server that is open beyond loopback without
// TLS or authentication.
type Listener struct {
	Receiver string // the component id, e.g. otlp
	Protocol string // the protocol section, e.g. grpc; empty for a receiver with one endpoint
	Endpoint string
}

// Find lists the exposed listeners of a collector configuration: every
// map with an endpoint under receivers (directly or one level down, as
// otlp's protocols::grpc) whose host is not loopback and that has neither a
// tls nor an auth section. Endpoints still holding an unexpanded ${...} are
// left out.
func Find(cfg map[string]any) []Listener {
	receivers, _ := cfg["receivers"].(map[string]any)
	var out []Listener
	for _, id := range sortedKeys(receivers) {
		rc, _ := receivers[id].(map[string]any)
		if exposed(rc) {
			out = append(out, Listener{Receiver: id, Endpoint: rc["endpoint"].(string)})
		}
		protocols, _ := rc["protocols"].(map[string]any)
		for _, proto := range sortedKeys(protocols) {
			pc, _ := protocols[proto].(map[string]any)
			if exposed(pc) {
				out = append(out, Listener{Receiver: id, Protocol: proto, Endpoint: pc["endpoint"].(string)})
			}
		}
	}
	return out
}

func exposed(server map[string]any) bool {
	endpoint, ok := server["endpoint"].(string)
	if !ok || strings.Contains(endpoint, "${") {
		return false
	}
	if server["tls"] != nil || server["auth"] != nil {
		return false
	}
	if t, _ := server["transport"].(string); t == "unix" || t == "unixpacket" {
		// A socket file, or an abstract socket (@name) in the network
		// namespace: no further than loopback.
		return false
	}
	return !loopback(endpoint)
}

// loopback tells whether endpoint (host:port) binds only the loopback
// interface. An empty host binds every interface.
func loopback(endpoint string) bool {
	host, _, err := net.SplitHostPort(endpoint)
	if err != nil {
		host = endpoint // a unix socket path or a bare host
		if strings.HasPrefix(host, "/") {
			return true
		}
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
