// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"text/template"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/promtext"
)

// awsCreds are fake AWS credentials given to the collector through its
// environment; the CloudWatch test endpoint does not check signatures, and
// the tests check that the secret parts never show up in the output.
type awsCreds struct {
	AccessKeyID, SecretAccessKey, SessionToken string
}

func newAWSCreds(t testing.TB) awsCreds {
	t.Helper()
	secret := make([]byte, 20)
	_, err := rand.Read(secret)
	require.NoError(t, err)
	return awsCreds{
		AccessKeyID:     "AKIDTESTE2E0000000001",
		SecretAccessKey: "e2eSecret" + hex.EncodeToString(secret),
		SessionToken:    "e2eSession" + hex.EncodeToString(secret[:10]),
	}
}

// cleanEnv is the collector's environment: nothing of the runner's AWS or
// GPUBUILD settings, no instance metadata lookups, and the fake credentials.
func cleanEnv(creds awsCreds, extra ...string) []string {
	env := binarytest.EnvWithout("AWS_", "GPUBUILD_", "OTEL_")
	env = append(env,
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_ACCESS_KEY_ID="+creds.AccessKeyID,
		"AWS_SECRET_ACCESS_KEY="+creds.SecretAccessKey,
		"AWS_SESSION_TOKEN="+creds.SessionToken,
		"AWS_CONFIG_FILE=/dev/null",
		"AWS_SHARED_CREDENTIALS_FILE=/dev/null",
	)
	return append(env, extra...)
}

// ports are the collector's listeners, all on 127.0.0.1.
type ports struct {
	GRPC, HTTP, Health, Telemetry int
}

func newPorts(t testing.TB) ports {
	p := binarytest.FreePorts(t, 4)
	return ports{GRPC: p[0], HTTP: p[1], Health: p[2], Telemetry: p[3]}
}

// sidecarConfig fills testdata/sidecar.yaml.tmpl.
type sidecarConfig struct {
	ports
	CloudWatchEndpoint string
	Namespace          string
	QueueDir           string
	FlushInterval      time.Duration
	QueueSize          int
	// BlockOnOverflow makes a full queue block the sender instead of
	// refusing.
	BlockOnOverflow bool
	// APIFromSpans derives api.requests from SERVER spans (connector)
	// instead of http.server.request.duration histograms (processor).
	APIFromSpans bool
	// RetryMaxElapsed bounds the exporter's retries of one batch.
	RetryMaxElapsed time.Duration
	// MaxRequestsPerSecond caps PutMetricData calls (0: no cap).
	MaxRequestsPerSecond float64
	MemoryLimitMiB       int
	MemorySpikeMiB       int
	// MaxRecvMiB caps one OTLP request (gRPC message and HTTP body).
	MaxRecvMiB int
	// TLSCert and TLSKey turn TLS on for both OTLP listeners.
	TLSCert, TLSKey string
	// BearerToken turns bearer-token auth on for both OTLP listeners.
	BearerToken string
	LogLevel    string
}

func defaultSidecarConfig(t testing.TB, p ports, cw *cloudwatchtest.Server) sidecarConfig {
	return sidecarConfig{
		ports:              p,
		CloudWatchEndpoint: cw.Endpoint(),
		Namespace:          "GPUBuild/E2E",
		QueueDir:           t.TempDir(),
		FlushInterval:      time.Second,
		QueueSize:          1000,
		RetryMaxElapsed:    5 * time.Minute,
		MemoryLimitMiB:     400,
		MemorySpikeMiB:     80,
		MaxRecvMiB:         4,
		LogLevel:           "info",
	}
}

func renderConfig(t testing.TB, tmplName string, data any) string {
	t.Helper()
	tmpl, err := template.New(tmplName).Funcs(template.FuncMap{"bytes": func(mib int) int { return mib << 20 }}).
		ParseFiles(filepath.Join("testdata", tmplName))
	require.NoError(t, err)
	var b bytes.Buffer
	require.NoError(t, tmpl.Execute(&b, data))
	path := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(path, b.Bytes(), 0o600))
	return path
}

// collector is one run of the built binary.
type collector struct {
	*binarytest.Process
	t     testing.TB
	ports ports
}

// allOutput gathers every collector's output of a test, so a test can
// check that no run printed a secret.
type allOutput struct {
	mu   sync.Mutex
	runs []*binarytest.Buffer
}

func (a *allOutput) add(b *binarytest.Buffer) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.runs = append(a.runs, b)
}

func (a *allOutput) String() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var s strings.Builder
	for _, b := range a.runs {
		s.WriteString(b.String())
	}
	return s.String()
}

// startCollector runs the binary with the config file and environment and
// waits until its health check answers. The process is killed at the end
// of the test whatever happens.
func startCollector(t testing.TB, configPath string, p ports, env []string, outputs *allOutput) *collector {
	t.Helper()
	c := &collector{Process: binarytest.StartBinary(t, env, "--config", configPath), t: t, ports: p}
	if outputs != nil {
		outputs.add(c.Output)
	}
	if p.Health != 0 {
		require.NoError(t, c.AwaitHealthy(c.healthURL(), 30*time.Second), "collector")
	}
	return c
}

func (c *collector) healthURL() string { return fmt.Sprintf("http://127.0.0.1:%d/", c.ports.Health) }

func (c *collector) healthy() bool { return binarytest.Healthy(c.healthURL()) }

// stop sends SIGTERM and waits for the exit; it reports how long the
// shutdown took and fails the test if it takes longer than timeout or the
// exit is not clean.
func (c *collector) stop(timeout time.Duration) time.Duration {
	c.t.Helper()
	took, err := c.Stop(timeout)
	if err != nil {
		c.t.Errorf("collector after SIGTERM: %v\n%s", err, binarytest.Tail(c.Output.String(), 6000))
	}
	return took
}

// rssKiB reads VmRSS and VmHWM (peak) of the collector from /proc.
func (c *collector) rssKiB() (rss, peak int64) {
	rss, peak, _ = binarytest.MemKiB(c.Pid())
	return rss, peak
}

// telemetry scrapes the collector's own metrics.
func (c *collector) telemetry() (promtext.Families, error) {
	return promtext.Scrape(fmt.Sprintf("127.0.0.1:%d", c.ports.Telemetry))
}

// startCloudWatch starts the protocol-faithful PutMetricData endpoint.
func startCloudWatch(t testing.TB) *cloudwatchtest.Server {
	t.Helper()
	srv, err := cloudwatchtest.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

// almostEqual compares sums that were computed by different code in a
// different order: equal within 1e-9 relative.
func almostEqual(a, b float64) bool {
	if a == b {
		return true
	}
	return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b))
}
