// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package destinations

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

const (
	remoteWriteSocketName = "remote-write.sock"
	// Linux's sun_path holds 108 bytes with the terminating NUL.
	maxSocketPath = 107
)

func (set *settings) readCloudWatchOTLP(env envReader) error {
	region := env.get(EnvAWSRegion, "")
	if region == "" {
		return fmt.Errorf("%s is required by %s=%s (the AWS region to sign for, e.g. us-east-1)", EnvAWSRegion, EnvDestinations, CloudWatchOTLP)
	}
	endpoint := env.get(EnvCloudWatchOTLPEndpoint, "https://monitoring."+region+".amazonaws.com/v1/metrics")
	if err := checkURL(EnvCloudWatchOTLPEndpoint, endpoint); err != nil {
		return err
	}
	set.CloudWatchOTLP.Region, set.CloudWatchOTLP.Endpoint = region, endpoint
	return nil
}

func (set *settings) readPrometheus(env envReader) error {
	host := env.get(EnvPrometheusHost, defaultPromHost)
	port, err := env.port(EnvPrometheusPort, defaultPromPort)
	if err != nil {
		return err
	}
	set.Prometheus.Endpoint = net.JoinHostPort(host, strconv.Itoa(port))
	return nil
}

// readRemoteWrite picks how remote write keeps what it has not sent: the
// persistent queue in front of it (the default, with a queue directory),
// the contrib write-ahead log (GPUBUILD_PROMETHEUS_REMOTE_WRITE_WAL=true), or
// the exporter's in-memory queue (no queue directory: an outage's samples,
// not a restart's).
func (set *settings) readRemoteWrite(env envReader, storageCfg map[string]any) error {
	endpoint := env.get(EnvRemoteWriteEndpoint, "")
	if endpoint == "" {
		return fmt.Errorf("%s is required by %s=%s (the remote write URL, e.g. http://127.0.0.1:9090/api/v1/write)", EnvRemoteWriteEndpoint, EnvDestinations, PrometheusRemoteWrite)
	}
	if err := checkURL(EnvRemoteWriteEndpoint, endpoint); err != nil {
		return err
	}
	useWAL, err := env.boolean(EnvRemoteWriteWAL, "false")
	if err != nil {
		return err
	}
	rw := &set.RemoteWrite
	rw.Endpoint = endpoint
	dir, _ := storageCfg["directory"].(string)
	switch {
	case dir != "" && *useWAL:
		rw.Mode, rw.WALDirectory = "wal", strings.TrimRight(dir, "/")+"/prometheus-remote-write-wal"
	case dir == "":
		rw.Mode = "memory"
	default:
		socket, err := remoteWriteSocket(dir)
		if err != nil {
			return err
		}
		rw.Mode, rw.Socket = "queue", socket
	}
	return nil
}

// remoteWriteSocket is the Unix socket between the remote-write queue and
// its exporter, in the queue directory (one collector per directory:
// file_storage locks it), or, where that path is too long for a socket
// address, in the temporary directory under a name made from it. A socket
// file a killed collector left behind is removed; one that answers belongs
// to a running collector and is left alone (its listener then fails at
// start, naming the address).
func remoteWriteSocket(queueDir string) (string, error) {
	path := filepath.Join(queueDir, remoteWriteSocketName)
	if len(path) > maxSocketPath {
		sum := sha256.Sum256([]byte(filepath.Clean(queueDir)))
		path = filepath.Join(os.TempDir(), "otelcol-gpubuild-"+hex.EncodeToString(sum[:8])+"-"+remoteWriteSocketName)
	}
	if len(path) > maxSocketPath {
		return "", fmt.Errorf("%s=%s: no socket path short enough for the remote-write queue (%s)", EnvDestinations, PrometheusRemoteWrite, path)
	}
	removeStaleSocket(path)
	return path, nil
}

// removeStaleSocket removes path when it is a socket nobody listens on.
func removeStaleSocket(path string) {
	st, err := os.Lstat(path)
	if err != nil || st.Mode().Type() != os.ModeSocket {
		return
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		_ = c.Close()
		return
	}
	_ = os.Remove(path)
}

func (set *settings) readOTLP(env envReader) error {
	endpoint := env.get(EnvOTLPEndpoint, "")
	if endpoint == "" {
		return fmt.Errorf("%s is required by %s=%s (the OTLP endpoint, e.g. http://127.0.0.1:4318)", EnvOTLPEndpoint, EnvDestinations, OTLP)
	}
	protocol := env.get(EnvOTLPProtocol, "http/protobuf")
	temporality := strings.ToLower(env.get(EnvOTLPTemporality, "cumulative"))
	switch temporality {
	case "cumulative", "delta":
	default:
		return fmt.Errorf("%s: %q is not a temporality (accepted: cumulative, delta)", EnvOTLPTemporality, temporality)
	}
	headers, err := ParseHeaders(env.get(EnvOTLPHeaders, ""))
	if err != nil {
		return err
	}
	insecure, err := env.boolean(EnvOTLPInsecure, "")
	if err != nil {
		return err
	}
	o := &set.OTLP
	o.Temporality = temporality
	switch protocol {
	case "http/protobuf":
		if err := checkURL(EnvOTLPEndpoint, endpoint); err != nil {
			return err
		}
		o.ID, o.Endpoint, o.HTTP = otlpHTTPExp, endpoint, true
	case "grpc":
		hostPort := endpoint
		if u, perr := url.Parse(endpoint); perr == nil && (u.Scheme == "http" || u.Scheme == "https") {
			hostPort = u.Host
			if u.Scheme == "http" && insecure == nil {
				t := true
				insecure = &t
			}
		}
		if _, _, err := net.SplitHostPort(hostPort); err != nil {
			return fmt.Errorf("%s: %q is not host:port or a URL with a port", EnvOTLPEndpoint, endpoint)
		}
		o.ID, o.Endpoint = otlpGRPCExp, hostPort
	default:
		return fmt.Errorf("%s: %q is not a protocol (accepted: grpc, http/protobuf)", EnvOTLPProtocol, protocol)
	}
	if len(headers) > 0 {
		o.Headers = headers
	}
	o.TLS = tlsSettings(env, insecure, EnvOTLPCAFile, EnvOTLPClientCertFile, EnvOTLPClientKeyFile)
	return nil
}

// tlsSettings is an exporter's tls block from the three file variables and
// insecure (nil: unset); nil when nothing is set.
func tlsSettings(env envReader, insecure *bool, caFile, certFile, keyFile string) map[string]any {
	tls := map[string]any{}
	for key, name := range map[string]string{"ca_file": caFile, "cert_file": certFile, "key_file": keyFile} {
		if v := env.get(name, ""); v != "" {
			tls[key] = v
		}
	}
	if insecure != nil {
		tls["insecure"] = *insecure
	}
	if len(tls) == 0 {
		return nil
	}
	return tls
}

// readGateway reads where a fleet's gateways are (docs/fleet.md).
func (set *settings) readGateway(env envReader) error {
	endpoint := env.get(EnvGatewayEndpoint, "")
	if endpoint == "" {
		return fmt.Errorf("%s is required by %s=%s (the gateways' host:port, e.g. otelcol-gateway.observability.svc.cluster.local:4317)", EnvGatewayEndpoint, EnvDestinations, Gateway)
	}
	if _, port, err := net.SplitHostPort(endpoint); err != nil || strings.Contains(endpoint, "/") {
		return fmt.Errorf("%s: %q is not host:port", EnvGatewayEndpoint, endpoint)
	} else if _, err := strconv.Atoi(port); err != nil {
		return fmt.Errorf("%s: %q is not host:port", EnvGatewayEndpoint, endpoint)
	}
	timeout, err := env.duration(EnvGatewayTimeout, "10s")
	if err != nil {
		return err
	}
	insecure, err := env.boolean(EnvGatewayInsecure, "true")
	if err != nil {
		return err
	}
	set.Gateway.Endpoint, set.Gateway.Timeout = endpoint, timeout
	set.Gateway.TLS = tlsSettings(env, insecure, EnvGatewayCAFile, EnvGatewayClientCertFile, EnvGatewayClientKeyFile)
	return nil
}

// ParseHeaders reads the OTEL_EXPORTER_OTLP_HEADERS format: comma-separated
// key=value pairs, values URL-encoded.
func ParseHeaders(raw string) (map[string]any, error) {
	out := map[string]any{}
	for _, pair := range strings.Split(raw, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		key, value, ok := strings.Cut(pair, "=")
		key = strings.TrimSpace(key)
		if !ok || key == "" {
			return nil, fmt.Errorf("%s: %q is not key=value (accepted: comma-separated key=value pairs, values URL-encoded)", EnvOTLPHeaders, pair)
		}
		decoded, err := url.PathUnescape(strings.TrimSpace(value))
		if err != nil {
			return nil, fmt.Errorf("%s: value of %q is not URL-encoded: %w", EnvOTLPHeaders, key, err)
		}
		out[key] = decoded
	}
	return out, nil
}

func checkURL(name, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s: %q is not an http(s) URL", name, raw)
	}
	return nil
}
