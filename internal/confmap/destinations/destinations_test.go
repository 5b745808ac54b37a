// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package destinations

import (
	"crypto/sha256"
	"encoding/hex"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap/confmaptest"
)

func env(vals map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vals[k]; return v, ok }
}

func defaultConfig(t *testing.T) map[string]any {
	t.Helper()
	conf, err := confmaptest.LoadConf(filepath.Join("..", "..", "..", "otelcol-config.yaml"))
	require.NoError(t, err)
	return conf.ToStringMap()
}

func pipeline(t *testing.T, cfg map[string]any, id string) map[string]any {
	t.Helper()
	p, ok := cfg["service"].(map[string]any)["pipelines"].(map[string]any)[id].(map[string]any)
	require.True(t, ok, "pipeline %s missing", id)
	return p
}

func TestParse(t *testing.T) {
	got, err := Parse(env(nil))
	require.NoError(t, err)
	assert.Equal(t, []string{"cloudwatch"}, got, "unset means today's behaviour")

	got, err = Parse(env(map[string]string{EnvDestinations: " Prometheus , otlp,prometheus,, "}))
	require.NoError(t, err)
	assert.Equal(t, []string{"prometheus", "otlp"}, got)

	_, err = Parse(env(map[string]string{EnvDestinations: "cloudwatch,influx"}))
	require.EqualError(t, err, `GPUBUILD_DESTINATIONS: unknown destination "influx" (accepted: cloudwatch, cloudwatch-otlp, prometheus, prometheus-remote-write, otlp, gateway)`)

	_, err = Parse(env(map[string]string{EnvDestinations: " , "}))
	require.ErrorContains(t, err, "names no destination")
}

func TestDefaultLeavesConfigUntouched(t *testing.T) {
	cfg := defaultConfig(t)
	for _, v := range []string{"", "cloudwatch", " CloudWatch "} {
		out, err := Apply(cfg, env(map[string]string{EnvDestinations: v}))
		require.NoError(t, err)
		assert.Equal(t, cfg, out, "GPUBUILD_DESTINATIONS=%q", v)
	}
}

func TestAllDestinations(t *testing.T) {
	cfg := defaultConfig(t)
	// The collector expands ${env:...} before converters run.
	cfg["extensions"].(map[string]any)["file_storage/queue"].(map[string]any)["directory"] = "/q/"
	out, err := Apply(cfg, env(map[string]string{
		EnvDestinations:        "cloudwatch,cloudwatch-otlp,prometheus,prometheus-remote-write,otlp",
		EnvAWSRegion:           "eu-west-1",
		EnvRemoteWriteEndpoint: "http://127.0.0.1:9090/api/v1/write",
		EnvOTLPEndpoint:        "https://gateway.example:4318",
		EnvOTLPHeaders:         "authorization=Bearer%20abc,x-tenant=t1",
	}))
	require.NoError(t, err)

	source := pipeline(t, out, "metrics")
	assert.Equal(t, []any{"fanout/destinations"}, source["exporters"])
	assert.Equal(t, []any{"otlp", "nvml", "buildjob"}, source["receivers"], "receivers and derivation stay in one pipeline")

	// One pipeline per destination behind the fanout, each with its own
	// temporality conversion and state.
	cw := pipeline(t, out, "metrics/cloudwatch")
	assert.Equal(t, []any{"fanout/destinations"}, cw["receivers"])
	assert.Equal(t, []any{"cloudwatch"}, cw["exporters"])
	assert.NotContains(t, cw, "processors", "the cloudwatch exporter converts to delta itself")
	for name, exporter := range map[string]string{
		"cloudwatch_otlp":         "otlp_http/cloudwatch_otlp",
		"prometheus":              "prometheus/destination",
		"prometheus_remote_write": "otlp_grpc/remote_write_queue",
		"otlp":                    "otlp_http/destination",
	} {
		p := pipeline(t, out, "metrics/"+name)
		assert.Equal(t, []any{"fanout/destinations"}, p["receivers"], name)
		assert.Equal(t, []any{"temporality/" + name}, p["processors"], name)
		assert.Equal(t, []any{exporter}, p["exporters"], name)
		assert.Equal(t, map[string]any{
			"to": "cumulative", "max_stale": "24h", "max_series": 20000,
			"state": map[string]any{"storage": "file_storage/queue", "journal": map[string]any{"directory": "/q/", "fsync": "${env:GPUBUILD_STATE_FSYNC:-false}"}},
		}, out["processors"].(map[string]any)["temporality/"+name], name)
	}
	remoteWrite := pipeline(t, out, "metrics/remote_write")
	assert.Equal(t, []any{"otlp/remote_write_queue"}, remoteWrite["receivers"])
	assert.Equal(t, []any{"prometheusremotewrite/destination"}, remoteWrite["exporters"])

	exporters := out["exporters"].(map[string]any)
	cw = exporters["otlp_http/cloudwatch_otlp"].(map[string]any)
	assert.Equal(t, "https://monitoring.eu-west-1.amazonaws.com/v1/metrics", cw["metrics_endpoint"])
	assert.Equal(t, map[string]any{"region": "eu-west-1", "service": "monitoring"}, out["extensions"].(map[string]any)["sigv4auth/cloudwatch_otlp"])
	assert.Contains(t, out["service"].(map[string]any)["extensions"], "sigv4auth/cloudwatch_otlp")
	assert.Equal(t, "proto", cw["encoding"])
	assert.Equal(t, "gzip", cw["compression"])
	cwBatch := cw["sending_queue"].(map[string]any)["batch"].(map[string]any)
	assert.Equal(t, "bytes", cwBatch["sizer"], "CloudWatch OTLP requests are bounded in serialized bytes")
	assert.Less(t, cwBatch["max_size"], 5_000_000, "under the 5 MB uncompressed request cap AWS documents")

	prom := exporters["prometheus/destination"].(map[string]any)
	assert.Equal(t, "127.0.0.1:9464", prom["endpoint"])

	rw := exporters["prometheusremotewrite/destination"].(map[string]any)
	assert.NotContains(t, rw, "wal", "the persistent queue is the default")
	assert.Equal(t, map[string]any{"enabled": false}, rw["target_info"], "resource attributes are labels; no target_info series")
	assert.Equal(t, map[string]any{"enabled": true}, rw["resource_to_telemetry_conversion"])

	otlp := exporters["otlp_http/destination"].(map[string]any)
	assert.Equal(t, map[string]any{"authorization": "Bearer abc", "x-tenant": "t1"}, otlp["headers"])

	// Each sending destination has its own persistent queue (distinct
	// exporter ids give distinct keys in the one file_storage).
	for _, id := range []string{"otlp_http/cloudwatch_otlp", "otlp_grpc/remote_write_queue", "otlp_http/destination"} {
		q := exporters[id].(map[string]any)["sending_queue"].(map[string]any)
		assert.Equal(t, "file_storage/queue", q["storage"], id)
		assert.Equal(t, false, q["block_on_overflow"], id)
	}
	// The input is not modified.
	assert.Equal(t, []any{"cloudwatch"}, pipeline(t, cfg, "metrics")["exporters"])
}

func TestRemoteWriteQueueOrWAL(t *testing.T) {
	cfg := defaultConfig(t)
	cfg["extensions"].(map[string]any)["file_storage/queue"].(map[string]any)["directory"] = "/q"
	vals := map[string]string{EnvDestinations: "prometheus-remote-write", EnvRemoteWriteEndpoint: "http://127.0.0.1:9090/api/v1/write"}
	out, err := Apply(cfg, env(vals))
	require.NoError(t, err)

	// Default: the persistent queue in front of a synchronous exporter.
	exporters := out["exporters"].(map[string]any)
	rw := exporters["prometheusremotewrite/destination"].(map[string]any)
	assert.NotContains(t, rw, "wal")
	assert.Equal(t, map[string]any{"enabled": false}, rw["remote_write_queue"], "the exporter sends synchronously: the queue deletes a request once stored")
	assert.Equal(t, map[string]any{"enabled": false}, rw["retry_on_failure"], "retried from the persistent queue, not inside one export")
	assert.Equal(t, 1, rw["max_batch_request_parallelism"])
	queue := exporters["otlp_grpc/remote_write_queue"].(map[string]any)
	sq := queue["sending_queue"].(map[string]any)
	assert.Equal(t, "file_storage/queue", sq["storage"])
	assert.Equal(t, 1, sq["num_consumers"], "one consumer keeps the samples in order")
	assert.Equal(t, false, sq["block_on_overflow"])
	assert.Equal(t, true, queue["retry_on_failure"].(map[string]any)["enabled"])
	assert.Equal(t, "unix:///q/remote-write.sock", queue["endpoint"])
	grpc := out["receivers"].(map[string]any)["otlp/remote_write_queue"].(map[string]any)["protocols"].(map[string]any)["grpc"].(map[string]any)
	assert.Equal(t, "/q/remote-write.sock", grpc["endpoint"])
	assert.Equal(t, "unix", grpc["transport"])
	assert.Contains(t, out["receivers"], "otlp", "the configuration's own receivers stay")
	assert.Equal(t, []any{"otlp_grpc/remote_write_queue"}, pipeline(t, out, "metrics/prometheus_remote_write")["exporters"])

	// Without a queue directory: the exporter's in-memory queue.
	noStorage := defaultConfig(t)
	delete(noStorage["extensions"].(map[string]any), "file_storage/queue")
	out, err = Apply(noStorage, env(vals))
	require.NoError(t, err)
	rw = out["exporters"].(map[string]any)["prometheusremotewrite/destination"].(map[string]any)
	assert.Equal(t, map[string]any{"enabled": true, "queue_size": 10000, "num_consumers": 1}, rw["remote_write_queue"])
	assert.NotContains(t, out["exporters"], "otlp_grpc/remote_write_queue")
	assert.Equal(t, []any{"prometheusremotewrite/destination"}, pipeline(t, out, "metrics/prometheus_remote_write")["exporters"])
	assert.Equal(t, map[string]any{}, out["processors"].(map[string]any)["temporality/prometheus_remote_write"].(map[string]any)["state"],
		"no storage: the state in memory (the processor says so at start)")

	vals[EnvRemoteWriteWAL] = "true"
	out, err = Apply(cfg, env(vals))
	require.NoError(t, err)
	rw = out["exporters"].(map[string]any)["prometheusremotewrite/destination"].(map[string]any)
	assert.Equal(t, "/q/prometheus-remote-write-wal", rw["wal"].(map[string]any)["directory"])
	assert.NotContains(t, out["exporters"], "otlp_grpc/remote_write_queue", "the log instead of the queue")

	vals[EnvRemoteWriteWAL] = "sometimes"
	_, err = Apply(cfg, env(vals))
	require.ErrorContains(t, err, `GPUBUILD_PROMETHEUS_REMOTE_WRITE_WAL: "sometimes" is not a boolean (accepted: true, false)`)
}

// The socket lives in the queue directory; a directory too deep for a
// socket address (108 bytes) gets one in the temporary directory named
// after it. A socket left by a killed collector is removed, a live one is
// left alone.
func TestRemoteWriteSocket(t *testing.T) {
	dir := t.TempDir()
	path, err := remoteWriteSocket(dir)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "remote-write.sock"), path)

	deep := "/" + strings.Repeat("d", 120)
	path, err = remoteWriteSocket(deep)
	require.NoError(t, err)
	sum := sha256.Sum256([]byte(deep))
	assert.Equal(t, filepath.Join(os.TempDir(), "otelcol-gpubuild-"+hex.EncodeToString(sum[:8])+"-remote-write.sock"), path)

	live := filepath.Join(dir, "remote-write.sock")
	ln, err := net.Listen("unix", live)
	require.NoError(t, err)
	_, err = remoteWriteSocket(dir)
	require.NoError(t, err)
	assert.FileExists(t, live, "a socket that answers is left alone")

	// A killed listener leaves its file behind.
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	require.NoError(t, ln.Close())
	require.FileExists(t, live)
	_, err = remoteWriteSocket(dir)
	require.NoError(t, err)
	assert.NoFileExists(t, live, "a socket nobody listens on is removed")
	ln, err = net.Listen("unix", live)
	require.NoError(t, err, "so the receiver can listen on it again")
	require.NoError(t, ln.Close())
}

func TestWithoutCloudWatch(t *testing.T) {
	out, err := Apply(defaultConfig(t), env(map[string]string{EnvDestinations: "prometheus", EnvPrometheusHost: "0.0.0.0", EnvPrometheusPort: "9999"}))
	require.NoError(t, err)
	assert.Equal(t, []any{"fanout/destinations"}, pipeline(t, out, "metrics")["exporters"])
	assert.Equal(t, []any{"prometheus/destination"}, pipeline(t, out, "metrics/prometheus")["exporters"])
	assert.Equal(t, "0.0.0.0:9999", out["exporters"].(map[string]any)["prometheus/destination"].(map[string]any)["endpoint"])
}

func TestOTLPDeltaAndGRPC(t *testing.T) {
	out, err := Apply(defaultConfig(t), env(map[string]string{
		EnvDestinations:    "cloudwatch,otlp",
		EnvOTLPEndpoint:    "http://127.0.0.1:4317",
		EnvOTLPProtocol:    "grpc",
		EnvOTLPTemporality: "delta",
	}))
	require.NoError(t, err)
	assert.Equal(t, []any{"fanout/destinations"}, pipeline(t, out, "metrics")["exporters"])
	delta := pipeline(t, out, "metrics/otlp")
	assert.Equal(t, []any{"temporality/otlp"}, delta["processors"])
	assert.Equal(t, "delta", out["processors"].(map[string]any)["temporality/otlp"].(map[string]any)["to"])
	assert.Equal(t, []any{"otlp_grpc/destination"}, delta["exporters"])
	exp := out["exporters"].(map[string]any)["otlp_grpc/destination"].(map[string]any)
	assert.Equal(t, "127.0.0.1:4317", exp["endpoint"])
	assert.Equal(t, map[string]any{"insecure": true}, exp["tls"], "an http:// endpoint means plaintext gRPC")
}

func TestErrorsNameTheVariable(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{EnvDestinations: "otlp"}, "GPUBUILD_OTLP_ENDPOINT is required by GPUBUILD_DESTINATIONS=otlp"},
		{map[string]string{EnvDestinations: "prometheus-remote-write"}, "GPUBUILD_PROMETHEUS_REMOTE_WRITE_ENDPOINT is required by GPUBUILD_DESTINATIONS=prometheus-remote-write"},
		{map[string]string{EnvDestinations: "cloudwatch-otlp"}, "AWS_REGION is required by GPUBUILD_DESTINATIONS=cloudwatch-otlp"},
		{map[string]string{EnvDestinations: "otlp", EnvOTLPEndpoint: "http://x:1", EnvOTLPProtocol: "thrift"}, `GPUBUILD_OTLP_PROTOCOL: "thrift" is not a protocol (accepted: grpc, http/protobuf)`},
		{map[string]string{EnvDestinations: "otlp", EnvOTLPEndpoint: "http://x:1", EnvOTLPTemporality: "both"}, `GPUBUILD_OTLP_TEMPORALITY: "both" is not a temporality (accepted: cumulative, delta)`},
		{map[string]string{EnvDestinations: "otlp", EnvOTLPEndpoint: "http://x:1", EnvOTLPHeaders: "novalue"}, `GPUBUILD_OTLP_HEADERS: "novalue" is not key=value`},
		{map[string]string{EnvDestinations: "otlp", EnvOTLPEndpoint: "x:1"}, `GPUBUILD_OTLP_ENDPOINT: "x:1" is not an http(s) URL`},
		{map[string]string{EnvDestinations: "otlp", EnvOTLPEndpoint: "x", EnvOTLPProtocol: "grpc"}, `GPUBUILD_OTLP_ENDPOINT: "x" is not host:port`},
		{map[string]string{EnvDestinations: "otlp", EnvOTLPEndpoint: "http://x:1", EnvOTLPInsecure: "maybe"}, `GPUBUILD_OTLP_INSECURE: "maybe" is not a boolean`},
		{map[string]string{EnvDestinations: "prometheus", EnvPrometheusPort: "70000"}, `GPUBUILD_PROMETHEUS_PORT: "70000" is not a TCP port (accepted: 1-65535)`},
		{map[string]string{EnvDestinations: "prometheus", EnvQueueSize: "-1"}, `GPUBUILD_DESTINATION_QUEUE_SIZE: "-1" is not a positive integer`},
		{map[string]string{EnvDestinations: "prometheus", EnvCumulativeMaxStale: "soon"}, `GPUBUILD_CUMULATIVE_MAX_STALE: "soon" is not a duration`},
	} {
		_, err := Apply(defaultConfig(t), env(tc.env))
		require.Error(t, err, "%v", tc.env)
		assert.Contains(t, err.Error(), tc.want)
		assert.NotContains(t, err.Error(), "\n", "one line")
	}
}

func TestConfigWithoutMetricsPipeline(t *testing.T) {
	cfg := map[string]any{"service": map[string]any{"pipelines": map[string]any{"traces": map[string]any{}}}}
	_, err := Apply(cfg, env(map[string]string{EnvDestinations: "prometheus"}))
	require.ErrorContains(t, err, "no service::pipelines::metrics")
}

func TestParseHeaders(t *testing.T) {
	h, err := ParseHeaders("api-key=a%3Db , x=1")
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"api-key": "a=b", "x": "1"}, h)
	h, err = ParseHeaders("")
	require.NoError(t, err)
	assert.Empty(t, h)
	_, err = ParseHeaders("=v")
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), EnvOTLPHeaders))
}

// A fleet sidecar is the default configuration with GPUBUILD_DESTINATIONS=gateway:
// deltas only, each request stamped before the queue, the queue without batch.
func TestGateway(t *testing.T) {
	cfg := defaultConfig(t)
	out, err := Apply(cfg, env(map[string]string{EnvDestinations: "gateway", EnvGatewayEndpoint: "gateway.example:4317"}))
	require.NoError(t, err)
	assert.Equal(t, []any{"fanout/destinations"}, pipeline(t, out, "metrics")["exporters"])
	assert.Equal(t, []any{"otlp", "nvml", "buildjob"}, pipeline(t, out, "metrics")["receivers"], "the sidecar's own derivation, with its state")
	gw := pipeline(t, out, "metrics/gateway")
	assert.Equal(t, []any{"temporality/gateway", "requestid"}, gw["processors"], "converted to delta, then stamped last")
	assert.Equal(t, []any{"otlp_grpc/gateway"}, gw["exporters"])
	assert.Equal(t, "delta", out["processors"].(map[string]any)["temporality/gateway"].(map[string]any)["to"])
	exp := out["exporters"].(map[string]any)["otlp_grpc/gateway"].(map[string]any)
	assert.Equal(t, "gateway.example:4317", exp["endpoint"])
	q := exp["sending_queue"].(map[string]any)
	assert.NotContains(t, q, "batch", "a batch would merge or split stamped requests")
	assert.Equal(t, "file_storage/queue", q["storage"])
	assert.Equal(t, 10000, q["queue_size"], "requests, GPUBUILD_DESTINATION_QUEUE_SIZE")
	assert.Equal(t, 0, exp["retry_on_failure"].(map[string]any)["max_elapsed_time"])
	assert.Equal(t, map[string]any{"insecure": true}, exp["tls"])
	assert.NotContains(t, out["exporters"], "cloudwatch_otlp")

	_, err = Apply(cfg, env(map[string]string{EnvDestinations: "gateway"}))
	require.EqualError(t, err, "GPUBUILD_GATEWAY_ENDPOINT is required by GPUBUILD_DESTINATIONS=gateway (the gateways' host:port, e.g. otelcol-gateway.observability.svc.cluster.local:4317)")
	_, err = Apply(cfg, env(map[string]string{EnvDestinations: "gateway", EnvGatewayEndpoint: "http://gateway"}))
	require.ErrorContains(t, err, "GPUBUILD_GATEWAY_ENDPOINT:")
}
