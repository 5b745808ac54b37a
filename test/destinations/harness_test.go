// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package destinations

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/prometheustest"
)

// Fake AWS credentials: the local CloudWatch OTLP endpoint verifies the
// SigV4 signature with them, as AWS does with the real ones.
var testCreds = aws.Credentials{
	AccessKeyID:     "AKIDDESTINATIONS0001",
	SecretAccessKey: "destinationsSecretKey0000000000000000000",
	SessionToken:    "destinationsSessionToken",
}

const testRegion = "us-east-1"

// The Prometheus server of these tests (scraping the sidecar, receiving
// remote write).
type prometheusServer = prometheustest.Server

var startPrometheus = prometheustest.Start

// countingProxy forwards to target and counts requests and body bytes:
// what remote write sends over the wire. It also counts the store's own
// 4xx answers (a request refused for good) and keeps the last one's body.
type countingProxy struct {
	URL       string
	down      atomic.Bool
	refused   atomic.Int64
	requests  atomic.Int64
	bytes     atomic.Int64
	refused4x atomic.Int64
	mu        sync.Mutex
	last4x    string
}

// last4xx is the body of the store's last 4xx answer.
func (c *countingProxy) last4xx() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last4x
}

func startCountingProxy(t testing.TB, target string) *countingProxy {
	t.Helper()
	u, err := url.Parse(target)
	require.NoError(t, err)
	c := &countingProxy{}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ModifyResponse = func(resp *http.Response) error {
		if resp.StatusCode < 400 || resp.StatusCode >= 500 {
			return nil
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		c.refused4x.Add(1)
		c.mu.Lock()
		c.last4x = strings.TrimSpace(string(body))
		c.mu.Unlock()
		return nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if c.down.Load() {
			c.refused.Add(1)
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
			return
		}
		c.requests.Add(1)
		c.bytes.Add(int64(len(body)))
		r.Body = io.NopCloser(bytes.NewReader(body))
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	c.URL = "http://" + ln.Addr().String()
	return c
}

type collectorPorts struct {
	GRPC, HTTP, Health, Telemetry int
}

func newCollectorPorts(t testing.TB) collectorPorts {
	p := binarytest.FreePorts(t, 4)
	return collectorPorts{GRPC: p[0], HTTP: p[1], Health: p[2], Telemetry: p[3]}
}

// collectorEnv is a clean environment (nothing of the runner's AWS, GPUBUILD
// or OTEL settings) with the test credentials, the ports and extra.
func collectorEnv(p collectorPorts, queueDir string, extra ...string) []string {
	env := binarytest.EnvWithout("AWS_", "GPUBUILD_", "OTEL_")
	env = append(env,
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_ACCESS_KEY_ID="+testCreds.AccessKeyID,
		"AWS_SECRET_ACCESS_KEY="+testCreds.SecretAccessKey,
		"AWS_SESSION_TOKEN="+testCreds.SessionToken,
		"AWS_CONFIG_FILE=/dev/null",
		"AWS_SHARED_CREDENTIALS_FILE=/dev/null",
		"AWS_REGION="+testRegion,
		fmt.Sprintf("GPUBUILD_OTLP_GRPC_PORT=%d", p.GRPC),
		fmt.Sprintf("GPUBUILD_OTLP_HTTP_PORT=%d", p.HTTP),
		fmt.Sprintf("GPUBUILD_HEALTH_PORT=%d", p.Health),
		fmt.Sprintf("GPUBUILD_TELEMETRY_PORT=%d", p.Telemetry),
		"GPUBUILD_QUEUE_DIR="+queueDir,
		"GPUBUILD_FLUSH_INTERVAL=1s",
	)
	return append(env, extra...)
}

// startCollector runs the built binary on the repository's own
// otelcol-config.yaml, configured through the environment only, until it
// is healthy.
func startCollector(t testing.TB, p collectorPorts, env []string) *binarytest.Process {
	t.Helper()
	c := binarytest.StartBinary(t, env, "--config", filepath.Join(binarytest.RepoRoot(), "otelcol-config.yaml"))
	require.NoError(t, c.AwaitHealthy(fmt.Sprintf("http://127.0.0.1:%d/", p.Health), 60*time.Second), "collector not healthy")
	return c
}

// validate runs `otelcol-gpubuild validate` on the default config with env.
func validate(t testing.TB, env []string) (string, error) {
	t.Helper()
	cmd := exec.Command(binarytest.Binary(t), "validate", "--config", filepath.Join(binarytest.RepoRoot(), "otelcol-config.yaml"))
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return string(out), err
}
