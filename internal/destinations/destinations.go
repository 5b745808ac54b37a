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
// retry. The component configurations are generated here (not in the YAML)
// because an exporter that is defined is validated even when no pipeline
// uses it, and most destinations have a required setting.
//
// Unset or `cloudwatch` alone leaves the configuration untouched.
package destinations

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/confmap"
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
	temporalityType     = "temporality"
	toCumulative        = "cumulative"
	toDelta             = "delta"
	cloudWatchOTLPAuth  = "sigv4auth/cloudwatch_otlp"
	cloudWatchOTLPExp   = "otlp_http/cloudwatch_otlp"
	prometheusExp       = "prometheus/destination"
	remoteWriteExp      = "prometheusremotewrite/destination"
	remoteWriteQueueExp = "otlp_grpc/remote_write_queue"
	remoteWriteQueueRcv = "otlp/remote_write_queue"
	remoteWritePipeline = "metrics/remote_write"
	otlpGRPCExp         = "otlp_grpc/destination"
	otlpHTTPExp         = "otlp_http/destination"
	gatewayExp          = "otlp_grpc/gateway"
	requestID           = "requestid"
	queueStorage        = "file_storage/queue"
	cloudWatchType      = "cloudwatch"
	defaultPromHost     = "127.0.0.1"
	defaultPromPort     = "9464"
	defaultQueueSize    = "10000"
	defaultRetryElapsed = "1h"
	defaultMaxStale     = "24h"
	defaultMaxStreams   = "20000"
	// Serialized bytes per CloudWatch OTLP request: at most 4 MiB, under
	// the documented 5 MB; a batch leaves at 256 KiB or after a second.
	cloudWatchOTLPMaxBatch = 4 << 20
	cloudWatchOTLPMinBatch = 256 << 10
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
// GPUBUILD_DESTINATIONS names. It does not modify cfg.
func Apply(cfg map[string]any, lookupEnv func(string) (string, bool)) (map[string]any, error) {
	names, err := Parse(lookupEnv)
	if err != nil {
		return nil, err
	}
	if slices.Equal(names, []string{CloudWatch}) {
		return cfg, nil
	}
	env := envReader(lookupEnv)
	out := cloneMap(cfg)
	service := cloneMap(asMap(out["service"]))
	pipelines := cloneMap(asMap(service["pipelines"]))
	source := asMap(pipelines[sourcePipeline])
	if source == nil {
		return nil, fmt.Errorf("%s: the configuration has no service::pipelines::%s to send from", EnvDestinations, sourcePipeline)
	}
	source = cloneMap(source)

	extensions := cloneMap(asMap(out["extensions"]))
	exporters := cloneMap(asMap(out["exporters"]))
	processors := cloneMap(asMap(out["processors"]))
	connectors := cloneMap(asMap(out["connectors"]))
	receivers := cloneMap(asMap(out["receivers"]))
	serviceExtensions := asList(service["extensions"])
	storage := ""
	if _, ok := extensions[queueStorage]; ok {
		storage = queueStorage
	}
	common, err := commonSettings(env, storage)
	if err != nil {
		return nil, err
	}

	var cloudWatchExporters, sourceExporters []any
	for _, id := range asList(source["exporters"]) {
		if s, ok := id.(string); ok && componentType(s) == cloudWatchType {
			cloudWatchExporters = append(cloudWatchExporters, id)
			continue
		}
		sourceExporters = append(sourceExporters, id)
	}
	if slices.Contains(names, CloudWatch) && len(cloudWatchExporters) == 0 {
		return nil, fmt.Errorf("%s=cloudwatch: service::pipelines::%s has no cloudwatch exporter", EnvDestinations, sourcePipeline)
	}

	// Every destination is a pipeline of its own behind the fanout
	// connector, which keeps one destination's refusal from making the
	// others receive anything twice; each converts to the temporality its
	// store reads with a state of its own, saved beside the queue.
	connectors[fanout] = nil
	sourceExporters = append(sourceExporters, fanout)
	state := temporalityState(asMap(extensions[queueStorage]), storage)
	branch := func(name string, exporters []any, to string) {
		p := map[string]any{"receivers": []any{fanout}, "exporters": exporters}
		if to != "" {
			id := temporalityType + "/" + pipelineName(name)
			processors[id] = map[string]any{
				"to":         to,
				"max_stale":  common.maxStale,
				"max_series": common.maxStreams,
				"state":      state,
			}
			p["processors"] = []any{id}
		}
		pipelines[sourcePipeline+"/"+pipelineName(name)] = p
	}
	for _, name := range names {
		switch name {
		case CloudWatch:
			// The exporter converts to delta itself, with its own saved state.
			branch(name, cloudWatchExporters, "")
		case CloudWatchOTLP:
			exp, ext, err := cloudWatchOTLPConfig(env, common)
			if err != nil {
				return nil, err
			}
			exporters[cloudWatchOTLPExp] = exp
			extensions[cloudWatchOTLPAuth] = ext
			if !slices.Contains(serviceExtensions, any(cloudWatchOTLPAuth)) {
				serviceExtensions = append(serviceExtensions, cloudWatchOTLPAuth)
			}
			branch(name, []any{cloudWatchOTLPExp}, toCumulative)
		case Prometheus:
			exp, err := prometheusConfig(env, common)
			if err != nil {
				return nil, err
			}
			exporters[prometheusExp] = exp
			branch(name, []any{prometheusExp}, toCumulative)
		case PrometheusRemoteWrite:
			rw, err := remoteWriteConfig(env, common, asMap(extensions[queueStorage]))
			if err != nil {
				return nil, err
			}
			exporters[remoteWriteExp] = rw.exporter
			if rw.queue == nil {
				branch(name, []any{remoteWriteExp}, toCumulative)
				break
			}
			exporters[remoteWriteQueueExp] = rw.queue
			receivers[remoteWriteQueueRcv] = rw.queueReceiver
			pipelines[remoteWritePipeline] = map[string]any{
				"receivers": []any{remoteWriteQueueRcv},
				"exporters": []any{remoteWriteExp},
			}
			branch(name, []any{remoteWriteQueueExp}, toCumulative)
		case Gateway:
			exp, err := gatewayConfig(env, common)
			if err != nil {
				return nil, err
			}
			exporters[gatewayExp] = exp
			// Deltas only, so a sidecar may move between gateways at any
			// time; then each request's identity, fixed before the queue.
			branch(name, []any{gatewayExp}, toDelta)
			p := asMap(pipelines[sourcePipeline+"/"+name])
			p["processors"] = append(asList(p["processors"]), requestID)
			processors[requestID] = nil
		case OTLP:
			id, exp, delta, err := otlpConfig(env, common)
			if err != nil {
				return nil, err
			}
			exporters[id] = exp
			to := toCumulative
			if delta {
				to = toDelta
			}
			branch(name, []any{id}, to)
		}
	}

	source["exporters"] = sourceExporters
	pipelines[sourcePipeline] = source
	service["pipelines"] = pipelines
	if len(serviceExtensions) > 0 {
		service["extensions"] = serviceExtensions
	}
	out["service"] = service
	out["exporters"] = exporters
	setIfNotEmpty(out, "extensions", extensions)
	setIfNotEmpty(out, "receivers", receivers)
	setIfNotEmpty(out, "processors", processors)
	setIfNotEmpty(out, "connectors", connectors)
	return out, nil
}

// pipelineName is a destination's name as a component or pipeline name.
func pipelineName(destination string) string {
	return strings.ReplaceAll(destination, "-", "_")
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

// settings every sending destination shares.
type common struct {
	queue      map[string]any
	queueSize  int
	retry      map[string]any
	maxStale   string
	maxStreams int
}

func commonSettings(env envReader, storage string) (common, error) {
	size, err := env.positiveInt(EnvQueueSize, defaultQueueSize)
	if err != nil {
		return common{}, err
	}
	elapsed, err := env.duration(EnvRetryMaxElapsed, defaultRetryElapsed)
	if err != nil {
		return common{}, err
	}
	maxStale, err := env.duration(EnvCumulativeMaxStale, defaultMaxStale)
	if err != nil {
		return common{}, err
	}
	maxStreams, err := env.positiveInt(EnvCumulativeMaxStreams, defaultMaxStreams)
	if err != nil {
		return common{}, err
	}
	queue := map[string]any{
		"enabled":    true,
		"queue_size": size,
		// A full queue refuses rather than blocks: a store that is down
		// must never hold up the pipeline that feeds the others.
		"block_on_overflow": false,
		"batch": map[string]any{
			"flush_timeout": "1s",
			"min_size":      1000,
			"max_size":      20000,
		},
	}
	if storage != "" {
		queue["storage"] = storage
	}
	return common{
		queue:     queue,
		queueSize: size,
		retry: map[string]any{
			"enabled":          true,
			"initial_interval": "1s",
			"max_interval":     "30s",
			"max_elapsed_time": elapsed,
		},
		maxStale:   maxStale,
		maxStreams: maxStreams,
	}, nil
}

func cloudWatchOTLPConfig(env envReader, c common) (exporter, extension map[string]any, err error) {
	region := env.get(EnvAWSRegion, "")
	if region == "" {
		return nil, nil, fmt.Errorf("%s is required by %s=%s (the AWS region to sign for, e.g. us-east-1)", EnvAWSRegion, EnvDestinations, CloudWatchOTLP)
	}
	endpoint := env.get(EnvCloudWatchOTLPEndpoint, "https://monitoring."+region+".amazonaws.com/v1/metrics")
	if err := checkURL(EnvCloudWatchOTLPEndpoint, endpoint); err != nil {
		return nil, nil, err
	}
	// AWS documents a 5 MB cap on the uncompressed body of a request to
	// its OTLP endpoints (docs/destinations.md): batches are counted in
	// serialized bytes and split under it, whatever request size the
	// receivers are configured to accept (the shared batch's 20 000 points
	// are about 5.2 MB at this sidecar's 258 B a point).
	queue := cloneMap(c.queue)
	queue["batch"] = map[string]any{
		"sizer":         "bytes",
		"flush_timeout": "1s",
		"min_size":      cloudWatchOTLPMinBatch,
		"max_size":      cloudWatchOTLPMaxBatch,
	}
	return map[string]any{
			"metrics_endpoint": endpoint,
			"auth":             map[string]any{"authenticator": cloudWatchOTLPAuth},
			"encoding":         "proto",
			"compression":      "gzip",
			"timeout":          "10s",
			"sending_queue":    queue,
			"retry_on_failure": c.retry,
		}, map[string]any{
			"region":  region,
			"service": "monitoring",
		}, nil
}

func prometheusConfig(env envReader, c common) (map[string]any, error) {
	host := env.get(EnvPrometheusHost, defaultPromHost)
	port, err := env.port(EnvPrometheusPort, defaultPromPort)
	if err != nil {
		return nil, err
	}
	return map[string]any{
		"endpoint": net.JoinHostPort(host, strconv.Itoa(port)),
		// GPU and build resource attributes become labels, so series of
		// different GPUs or builds never collapse into one.
		"resource_to_telemetry_conversion": map[string]any{"enabled": true},
		"metric_expiration":                c.maxStale,
	}, nil
}

// remoteWrite is the generated configuration of prometheus-remote-write:
// the contrib exporter, and, when the queue directory is configured, the
// persistent queue in front of it (an OTLP exporter with the file_storage
// queue, sending over a socket to an OTLP receiver whose pipeline ends in
// the remote-write exporter).
type remoteWrite struct {
	exporter      map[string]any
	queue         map[string]any // nil: the exporter's in-memory queue or log
	queueReceiver map[string]any
}

func remoteWriteConfig(env envReader, c common, storage map[string]any) (remoteWrite, error) {
	endpoint := env.get(EnvRemoteWriteEndpoint, "")
	if endpoint == "" {
		return remoteWrite{}, fmt.Errorf("%s is required by %s=%s (the remote write URL, e.g. http://127.0.0.1:9090/api/v1/write)", EnvRemoteWriteEndpoint, EnvDestinations, PrometheusRemoteWrite)
	}
	if err := checkURL(EnvRemoteWriteEndpoint, endpoint); err != nil {
		return remoteWrite{}, err
	}
	cfg := map[string]any{
		"endpoint": endpoint,
		// Resource attributes become labels of every series, as in the
		// scrape endpoint.
		"resource_to_telemetry_conversion": map[string]any{"enabled": true},
		// No target_info: the resource attributes are on every series
		// already, and target_info is one series per resource stamped with
		// the newest point of each batch. The service's SDK exports and the
		// sidecar's derived flushes share the service's resource but carry
		// their own clocks, so an SDK export collected before a flush and
		// delivered after it gave target_info an older sample than the
		// flush's, which Prometheus refuses (out of order sample, 400) with
		// the whole request.
		"target_info":      map[string]any{"enabled": false},
		"retry_on_failure": c.retry,
		"timeout":          "10s",
		// Prometheus refuses a sample older than the newest of its series:
		// requests in parallel would reorder them, so send one at a time.
		"max_batch_request_parallelism": 1,
		"remote_write_queue":            map[string]any{"enabled": true, "queue_size": c.queueSize, "num_consumers": 1},
	}
	useWAL, err := env.boolean(EnvRemoteWriteWAL, "false")
	if err != nil {
		return remoteWrite{}, err
	}
	dir, _ := storage["directory"].(string)
	switch {
	case dir != "" && *useWAL:
		// The contrib write-ahead log keeps samples across a restart, but
		// on any failed send it re-reads from its oldest unsent entry: a
		// refused request is sent again for good, and the log is never
		// truncated again.
		cfg["wal"] = map[string]any{
			"directory": strings.TrimRight(dir, "/") + "/prometheus-remote-write-wal",
			// The log is sent (and truncated) this often: remote write
			// lags by up to this much.
			"truncate_frequency": "5s",
		}
		return remoteWrite{exporter: cfg}, nil
	case dir == "":
		// No queue directory: the in-memory queue keeps an outage's
		// samples, not a restart's.
		return remoteWrite{exporter: cfg}, nil
	}
	// The persistent queue: the contrib exporter has none, so an OTLP
	// exporter with the file_storage queue holds the data, in order (one
	// consumer), and hands it over a socket to a receiver whose pipeline
	// ends in the remote-write exporter. That exporter sends synchronously
	// (no queue of its own, no retry of its own): the receiver answers, and
	// the queue deletes a request, only once Prometheus stored it. A
	// refusal for good (4xx) comes back as a permanent error (gRPC
	// InvalidArgument), which the queue drops; anything else is retried
	// from the queue, across restarts. A request sent again after a lost
	// answer holds the samples Prometheus already has (same series,
	// timestamps and values), which it accepts as duplicates.
	cfg["remote_write_queue"] = map[string]any{"enabled": false}
	cfg["retry_on_failure"] = map[string]any{"enabled": false}
	socket, err := remoteWriteSocket(dir)
	if err != nil {
		return remoteWrite{}, err
	}
	queue := cloneMap(c.queue)
	queue["num_consumers"] = 1
	return remoteWrite{
		exporter: cfg,
		queue: map[string]any{
			"endpoint":    "unix://" + socket,
			"tls":         map[string]any{"insecure": true},
			"compression": "none",
			// Longer than one remote-write request (its own timeout).
			"timeout":          "30s",
			"sending_queue":    queue,
			"retry_on_failure": c.retry,
		},
		queueReceiver: map[string]any{
			"protocols": map[string]any{
				"grpc": map[string]any{
					"endpoint":  socket,
					"transport": "unix",
					// A batch of the queue is up to 20,000 points.
					"max_recv_msg_size_mib": 64,
				},
			},
		},
	}, nil
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

func otlpConfig(env envReader, c common) (id string, cfg map[string]any, delta bool, err error) {
	endpoint := env.get(EnvOTLPEndpoint, "")
	if endpoint == "" {
		return "", nil, false, fmt.Errorf("%s is required by %s=%s (the OTLP endpoint, e.g. http://127.0.0.1:4318)", EnvOTLPEndpoint, EnvDestinations, OTLP)
	}
	protocol := env.get(EnvOTLPProtocol, "http/protobuf")
	temporality := strings.ToLower(env.get(EnvOTLPTemporality, "cumulative"))
	switch temporality {
	case "cumulative", "delta":
	default:
		return "", nil, false, fmt.Errorf("%s: %q is not a temporality (accepted: cumulative, delta)", EnvOTLPTemporality, temporality)
	}
	headers, err := ParseHeaders(env.get(EnvOTLPHeaders, ""))
	if err != nil {
		return "", nil, false, err
	}
	insecure, err := env.boolean(EnvOTLPInsecure, "")
	if err != nil {
		return "", nil, false, err
	}
	tls := map[string]any{}
	for key, name := range map[string]string{"ca_file": EnvOTLPCAFile, "cert_file": EnvOTLPClientCertFile, "key_file": EnvOTLPClientKeyFile} {
		if v := env.get(name, ""); v != "" {
			tls[key] = v
		}
	}
	cfg = map[string]any{
		"timeout":          "10s",
		"compression":      "gzip",
		"sending_queue":    c.queue,
		"retry_on_failure": c.retry,
	}
	if len(headers) > 0 {
		cfg["headers"] = headers
	}
	switch protocol {
	case "http/protobuf":
		if err := checkURL(EnvOTLPEndpoint, endpoint); err != nil {
			return "", nil, false, err
		}
		// The exporter appends /v1/metrics, as OTEL_EXPORTER_OTLP_ENDPOINT does.
		cfg["endpoint"] = endpoint
		cfg["encoding"] = "proto"
		id = otlpHTTPExp
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
			return "", nil, false, fmt.Errorf("%s: %q is not host:port or a URL with a port", EnvOTLPEndpoint, endpoint)
		}
		cfg["endpoint"] = hostPort
		id = otlpGRPCExp
	default:
		return "", nil, false, fmt.Errorf("%s: %q is not a protocol (accepted: grpc, http/protobuf)", EnvOTLPProtocol, protocol)
	}
	if insecure != nil {
		tls["insecure"] = *insecure
	}
	if len(tls) > 0 {
		cfg["tls"] = tls
	}
	return id, cfg, temporality == "delta", nil
}

// gatewayConfig is the exporter to a fleet's gateways (docs/fleet.md): OTLP
// over gRPC, its queue on disk without batching (each request keeps the
// identity the requestid processor stamped), retried without end.
func gatewayConfig(env envReader, c common) (map[string]any, error) {
	endpoint := env.get(EnvGatewayEndpoint, "")
	if endpoint == "" {
		return nil, fmt.Errorf("%s is required by %s=%s (the gateways' host:port, e.g. otelcol-gateway.observability.svc.cluster.local:4317)", EnvGatewayEndpoint, EnvDestinations, Gateway)
	}
	if _, port, err := net.SplitHostPort(endpoint); err != nil || strings.Contains(endpoint, "/") {
		return nil, fmt.Errorf("%s: %q is not host:port", EnvGatewayEndpoint, endpoint)
	} else if _, err := strconv.Atoi(port); err != nil {
		return nil, fmt.Errorf("%s: %q is not host:port", EnvGatewayEndpoint, endpoint)
	}
	timeout, err := env.duration(EnvGatewayTimeout, "10s")
	if err != nil {
		return nil, err
	}
	insecure, err := env.boolean(EnvGatewayInsecure, "true")
	if err != nil {
		return nil, err
	}
	tls := map[string]any{"insecure": *insecure}
	for key, name := range map[string]string{"ca_file": EnvGatewayCAFile, "cert_file": EnvGatewayClientCertFile, "key_file": EnvGatewayClientKeyFile} {
		if v := env.get(name, ""); v != "" {
			tls[key] = v
		}
	}
	// The destinations' queue (GPUBUILD_DESTINATION_QUEUE_SIZE requests,
	// on disk), without its batch: a batch would merge or split stamped
	// requests.
	queue := cloneMap(c.queue)
	delete(queue, "batch")
	return map[string]any{
		"endpoint": endpoint,
		"tls":      tls,
		// A gateway answers once the request is in its receipt journal; a
		// retry after a timeout is merged once.
		"timeout":       timeout,
		"sending_queue": queue,
		"retry_on_failure": map[string]any{
			"enabled":          true,
			"initial_interval": "1s",
			"max_interval":     "30s",
			"max_elapsed_time": 0, // never give up on the gateways
		},
	}, nil
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

func setIfNotEmpty(cfg map[string]any, key string, m map[string]any) {
	if len(m) > 0 {
		cfg[key] = m
	}
}
