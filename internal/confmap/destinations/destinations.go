// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

// Package destinations is a confmap converter that picks the metric stores
// from one environment variable, GPUBUILD_DESTINATIONS (a comma list).
//
// The loaded configuration's `metrics` pipeline stays the one place where
// metrics are received and derived. The converter decides where it ends:
// in a fanout connector (connector/fanoutconnector) feeding one pipeline
// per destination, `metrics/<destination>`, so that one store refusing data
// never makes another receive it twice. Each pipeline converts to what its
// store reads with a temporality processor of its own
// (processor/temporalityprocessor), its state saved in the queue's
// file_storage so that a restart neither resets nor repeats a series:
//
//   - cloudwatch: the configuration's own cloudwatch exporter(s), fed as
//     they are (the exporter converts cumulative to delta itself);
//   - prometheus, prometheus-remote-write, cloudwatch-otlp and otlp (with
//     GPUBUILD_OTLP_TEMPORALITY=cumulative): to cumulative;
//   - otlp with GPUBUILD_OTLP_TEMPORALITY=delta: to delta;
//   - gateway (a fleet's gateways, docs/fleet.md): to delta, then the
//     requestid processor stamps each request before the exporter's queue.
//
// Every destination that sends is its own exporter with its own queue and
// retry. Each destination's components and pipeline are a YAML fragment,
// pipelines/<name>.yaml, rendered with the settings read (and checked) from
// the environment and merged in only when the destination is named: an
// exporter that is defined is validated even when no pipeline uses it, and
// most destinations have a required setting.
//
// Unset or `cloudwatch` alone leaves the configuration untouched.
package destinations

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"

	"go.opentelemetry.io/collector/confmap"
	"go.yaml.in/yaml/v3"
)

// Environment variables read by the converter.
const (
	EnvDestinations           = "GPUBUILD_DESTINATIONS"
	EnvAWSRegion              = "AWS_REGION"
	EnvCloudWatchOTLPEndpoint = "GPUBUILD_CLOUDWATCH_OTLP_ENDPOINT"
	EnvPrometheusHost         = "GPUBUILD_PROMETHEUS_HOST"
	EnvPrometheusPort         = "GPUBUILD_PROMETHEUS_PORT"
	EnvRemoteWriteEndpoint    = "GPUBUILD_PROMETHEUS_REMOTE_WRITE_ENDPOINT"
	EnvRemoteWriteWAL         = "GPUBUILD_PROMETHEUS_REMOTE_WRITE_WAL"
	EnvOTLPEndpoint           = "GPUBUILD_OTLP_ENDPOINT"
	EnvOTLPProtocol           = "GPUBUILD_OTLP_PROTOCOL"
	EnvOTLPHeaders            = "GPUBUILD_OTLP_HEADERS"
	EnvOTLPTemporality        = "GPUBUILD_OTLP_TEMPORALITY"
	EnvOTLPInsecure           = "GPUBUILD_OTLP_INSECURE"
	EnvOTLPCAFile             = "GPUBUILD_OTLP_CA_FILE"
	EnvOTLPClientCertFile     = "GPUBUILD_OTLP_CLIENT_CERT_FILE"
	EnvOTLPClientKeyFile      = "GPUBUILD_OTLP_CLIENT_KEY_FILE"
	EnvQueueSize              = "GPUBUILD_DESTINATION_QUEUE_SIZE"
	EnvRetryMaxElapsed        = "GPUBUILD_DESTINATION_RETRY_MAX_ELAPSED"
	EnvCumulativeMaxStale     = "GPUBUILD_CUMULATIVE_MAX_STALE"
	EnvCumulativeMaxStreams   = "GPUBUILD_CUMULATIVE_MAX_STREAMS"
	EnvGatewayEndpoint        = "GPUBUILD_GATEWAY_ENDPOINT"
	EnvGatewayTimeout         = "GPUBUILD_GATEWAY_TIMEOUT"
	EnvGatewayInsecure        = "GPUBUILD_GATEWAY_INSECURE"
	EnvGatewayCAFile          = "GPUBUILD_GATEWAY_CA_FILE"
	EnvGatewayClientCertFile  = "GPUBUILD_GATEWAY_CLIENT_CERT_FILE"
	EnvGatewayClientKeyFile   = "GPUBUILD_GATEWAY_CLIENT_KEY_FILE"
)

// Destination names accepted in GPUBUILD_DESTINATIONS.
const (
	CloudWatch            = "cloudwatch"
	CloudWatchOTLP        = "cloudwatch-otlp"
	Prometheus            = "prometheus"
	PrometheusRemoteWrite = "prometheus-remote-write"
	OTLP                  = "otlp"
	Gateway               = "gateway"
)

// Names lists the accepted destinations in the order they are documented.
var Names = []string{CloudWatch, CloudWatchOTLP, Prometheus, PrometheusRemoteWrite, OTLP, Gateway}

// Component ids the converter generates.
const (
	sourcePipeline      = "metrics"
	fanout              = "fanout/destinations"
	otlpGRPCExp         = "otlp_grpc/destination"
	otlpHTTPExp         = "otlp_http/destination"
	queueStorage        = "file_storage/queue"
	cloudWatchType      = "cloudwatch"
	defaultPromHost     = "127.0.0.1"
	defaultPromPort     = "9464"
	defaultQueueSize    = "10000"
	defaultRetryElapsed = "1h"
	defaultMaxStale     = "24h"
	defaultMaxStreams   = "20000"
)

// NewFactory returns the converter factory that ocb wires into the distribution.
func NewFactory() confmap.ConverterFactory {
	return confmap.NewConverterFactory(func(confmap.ConverterSettings) confmap.Converter {
		return converter{lookupEnv: os.LookupEnv}
	})
}

type converter struct {
	lookupEnv func(string) (string, bool)
}

func (c converter) Convert(_ context.Context, conf *confmap.Conf) error {
	out, err := Apply(conf.ToStringMap(), c.lookupEnv)
	if err != nil {
		return err
	}
	*conf = *confmap.NewFromStringMap(out)
	return nil
}

// Parse reads GPUBUILD_DESTINATIONS: unset or empty means cloudwatch alone.
// Names are trimmed, lower-cased and deduplicated, in the order given.
func Parse(lookupEnv func(string) (string, bool)) ([]string, error) {
	raw, _ := lookupEnv(EnvDestinations)
	if strings.TrimSpace(raw) == "" {
		return []string{CloudWatch}, nil
	}
	var out []string
	for _, part := range strings.Split(raw, ",") {
		name := strings.ToLower(strings.TrimSpace(part))
		if name == "" {
			continue
		}
		if !slices.Contains(Names, name) {
			return nil, fmt.Errorf("%s: unknown destination %q (accepted: %s)", EnvDestinations, name, strings.Join(Names, ", "))
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: %q names no destination (accepted: %s)", EnvDestinations, raw, strings.Join(Names, ", "))
	}
	return out, nil
}

// Apply rewrites a resolved collector configuration for the destinations
// GPUBUILD_DESTINATIONS names. It does not modify cfg. Each destination's
// components and pipeline are the YAML fragment pipelines/<name>.yaml,
// rendered with the settings read from the environment and merged in.
func Apply(cfg map[string]any, lookupEnv func(string) (string, bool)) (map[string]any, error) {
	names, err := Parse(lookupEnv)
	if err != nil {
		return nil, err
	}
	if slices.Equal(names, []string{CloudWatch}) {
		return cfg, nil
	}
	out := cloneMap(cfg)
	service := cloneMap(asMap(out["service"]))
	pipelines := cloneMap(asMap(service["pipelines"]))
	source := asMap(pipelines[sourcePipeline])
	if source == nil {
		return nil, fmt.Errorf("%s: the configuration has no service::pipelines::%s to send from", EnvDestinations, sourcePipeline)
	}
	source = cloneMap(source)

	storageCfg := asMap(asMap(out["extensions"])[queueStorage])
	set, err := readSettings(envReader(lookupEnv), names, storageCfg, asMap(out["extensions"])[queueStorage] != nil)
	if err != nil {
		return nil, err
	}
	var sourceExporters []any
	for _, id := range asList(source["exporters"]) {
		if s, ok := id.(string); ok && componentType(s) == cloudWatchType {
			set.CloudWatchExporters = append(set.CloudWatchExporters, id)
			continue
		}
		sourceExporters = append(sourceExporters, id)
	}
	if slices.Contains(names, CloudWatch) && len(set.CloudWatchExporters) == 0 {
		return nil, fmt.Errorf("%s=cloudwatch: service::pipelines::%s has no cloudwatch exporter", EnvDestinations, sourcePipeline)
	}

	// The metrics pipeline ends in the fanout connector, which keeps one
	// destination's refusal from making the others receive anything twice.
	source["exporters"] = append(sourceExporters, fanout)
	pipelines[sourcePipeline] = source
	service["pipelines"] = pipelines
	out["service"] = service
	connectors := cloneMap(asMap(out["connectors"]))
	connectors[fanout] = nil
	out["connectors"] = connectors
	for _, name := range names {
		fragment, err := render(name, set)
		if err != nil {
			return nil, err
		}
		merge(out, fragment)
	}
	return out, nil
}

// settings are the values the fragments are rendered with, read from the
// environment and checked (an error names the variable).
type settings struct {
	QueueSize       int
	Storage         string // the queue's storage extension, or ""
	RetryMaxElapsed string
	MaxStale        string
	MaxStreams      int
	State           map[string]any // the temporality processors' state

	CloudWatchExporters []any
	CloudWatchOTLP      struct{ Region, Endpoint string }
	Prometheus          struct{ Endpoint string }
	RemoteWrite         struct {
		Endpoint             string
		Mode                 string // queue, wal or memory
		Socket, WALDirectory string
	}
	OTLP struct {
		ID, Endpoint, Temporality string
		HTTP                      bool
		Headers, TLS              map[string]any
	}
	Gateway struct {
		Endpoint, Timeout string
		TLS               map[string]any
	}
}

func readSettings(env envReader, names []string, storageCfg map[string]any, hasStorage bool) (*settings, error) {
	set := &settings{}
	if hasStorage {
		set.Storage = queueStorage
	}
	var err error
	if set.QueueSize, err = env.positiveInt(EnvQueueSize, defaultQueueSize); err != nil {
		return nil, err
	}
	if set.RetryMaxElapsed, err = env.duration(EnvRetryMaxElapsed, defaultRetryElapsed); err != nil {
		return nil, err
	}
	if set.MaxStale, err = env.duration(EnvCumulativeMaxStale, defaultMaxStale); err != nil {
		return nil, err
	}
	if set.MaxStreams, err = env.positiveInt(EnvCumulativeMaxStreams, defaultMaxStreams); err != nil {
		return nil, err
	}
	set.State = temporalityState(storageCfg, set.Storage)
	for _, name := range names {
		switch name {
		case CloudWatchOTLP:
			err = set.readCloudWatchOTLP(env)
		case Prometheus:
			err = set.readPrometheus(env)
		case PrometheusRemoteWrite:
			err = set.readRemoteWrite(env, storageCfg)
		case OTLP:
			err = set.readOTLP(env)
		case Gateway:
			err = set.readGateway(env)
		}
		if err != nil {
			return nil, err
		}
	}
	return set, nil
}

//go:embed pipelines/*.yaml
var fragments embed.FS

var fragmentTemplates = template.Must(template.New("").Funcs(template.FuncMap{
	// json writes a value as a YAML flow value (JSON is YAML).
	"json": func(v any) (string, error) {
		b, err := json.Marshal(v)
		return string(b), err
	},
}).ParseFS(fragments, "pipelines/*.yaml"))

// render is the fragment of destination name, rendered with set.
func render(name string, set *settings) (map[string]any, error) {
	var b bytes.Buffer
	if err := fragmentTemplates.ExecuteTemplate(&b, name+".yaml", set); err != nil {
		return nil, fmt.Errorf("%s=%s: %w", EnvDestinations, name, err)
	}
	var out map[string]any
	if err := yaml.Unmarshal(b.Bytes(), &out); err != nil {
		return nil, fmt.Errorf("%s=%s: the rendered pipeline is not YAML: %w", EnvDestinations, name, err)
	}
	return out, nil
}

// merge adds src's components and pipelines to dst: maps are merged key by
// key, lists (service::extensions) are appended without repeats.
func merge(dst, src map[string]any) {
	for k, v := range src {
		switch sv := v.(type) {
		case map[string]any:
			dm := cloneMap(asMap(dst[k]))
			merge(dm, sv)
			dst[k] = dm
		case []any:
			list := asList(dst[k])
			for _, e := range sv {
				if !slices.Contains(list, e) {
					list = append(list, e)
				}
			}
			dst[k] = list
		default:
			dst[k] = v
		}
	}
}

// temporalityState is where a destination's temporality processor keeps its
// state: in the queue's file_storage, through a journal in its directory
// (synced as the storage is), or in memory where there is no storage (the
// processor says so at start).
func temporalityState(storageCfg map[string]any, storage string) map[string]any {
	if storage == "" {
		return map[string]any{}
	}
	state := map[string]any{"storage": storage}
	if dir, _ := storageCfg["directory"].(string); dir != "" {
		journal := map[string]any{"directory": dir}
		if fsync, ok := storageCfg["fsync"]; ok {
			journal["fsync"] = fsync
		}
		state["journal"] = journal
	}
	return state
}

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

const (
	remoteWriteSocketName = "remote-write.sock"
	// Linux's sun_path holds 108 bytes with the terminating NUL.
	maxSocketPath = 107
)

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

type envReader func(string) (string, bool)

func (e envReader) get(name, def string) string {
	if v, ok := e(name); ok && strings.TrimSpace(v) != "" {
		return strings.TrimSpace(v)
	}
	return def
}

func (e envReader) positiveInt(name, def string) (int, error) {
	v := e.get(name, def)
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s: %q is not a positive integer", name, v)
	}
	return n, nil
}

func (e envReader) port(name, def string) (int, error) {
	v := e.get(name, def)
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("%s: %q is not a TCP port (accepted: 1-65535)", name, v)
	}
	return n, nil
}

func (e envReader) duration(name, def string) (string, error) {
	v := e.get(name, def)
	if _, err := time.ParseDuration(v); err != nil {
		return "", fmt.Errorf("%s: %q is not a duration (e.g. 30m, 1h)", name, v)
	}
	return v, nil
}

func (e envReader) boolean(name, def string) (*bool, error) {
	v := e.get(name, def)
	if v == "" {
		return nil, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %q is not a boolean (accepted: true, false)", name, v)
	}
	return &b, nil
}

func componentType(id string) string {
	typ, _, _ := strings.Cut(id, "/")
	return typ
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func asList(v any) []any {
	l, _ := v.([]any)
	return slices.Clone(l)
}

func cloneMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
