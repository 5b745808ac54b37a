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
	"embed"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"text/template"

	"go.opentelemetry.io/collector/confmap"
	"go.yaml.in/yaml/v3"

	"github.com/gpubuild/otelcol-gpubuild/internal/confmap/maprewrite"
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
func NewFactory() confmap.ConverterFactory { return maprewrite.NewFactory(Apply) }

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
