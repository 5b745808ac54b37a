// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/buildsim"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
)

// testPKI is a throwaway CA and a server certificate for 127.0.0.1.
type testPKI struct {
	CAFile, CertFile, KeyFile string
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "e2e test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "otelcol-gpubuild"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)

	p := testPKI{CAFile: filepath.Join(dir, "ca.pem"), CertFile: filepath.Join(dir, "cert.pem"), KeyFile: filepath.Join(dir, "key.pem")}
	write := func(path, typ string, b []byte) {
		require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600))
	}
	write(p.CAFile, "CERTIFICATE", caDER)
	write(p.CertFile, "CERTIFICATE", der)
	write(p.KeyFile, "EC PRIVATE KEY", keyDER)
	return p
}

// refusedRun sends a few jobs that the collector must refuse, with no
// retries, and returns the export errors.
func refusedRun(t *testing.T, cfg buildsim.Config) buildsim.ExportStats {
	t.Helper()
	cfg.Jobs, cfg.Rate = 3, 0
	cfg.RetryMaxElapsed = 0
	cfg.ExportTimeout = 5 * time.Second
	s, err := buildsim.Run(context.Background(), cfg)
	require.Error(t, err, "the final flush reports the refusal")
	require.NotNil(t, s)
	assert.Equal(t, s.Exports.Spans.Requests, s.Exports.Spans.RequestsFailed, "spans were accepted")
	assert.Equal(t, s.Exports.LogRecords.Requests, s.Exports.LogRecords.RequestsFailed, "log records were accepted")
	assert.Equal(t, s.Exports.MetricPoints.Requests, s.Exports.MetricPoints.RequestsFailed, "metric points were accepted")
	assert.Positive(t, s.Exports.Spans.Requests)
	return s.Exports
}

// The hardened sidecar config (docs/hardened-sidecar.md): OTLP over TLS with
// a bearer token. A client without TLS, without the token or with a wrong
// one is refused on both protocols; one with both is served, exactly.
func TestOTLPWithTLSAndBearerToken(t *testing.T) {
	pki := newTestPKI(t)
	token := "e2e-token-" + hex.EncodeToString([]byte(t.Name()))[:16]
	e := newEnv(t, func(c *sidecarConfig) {
		c.TLSCert, c.TLSKey = pki.CertFile, pki.KeyFile
		c.BearerToken = token
	}, "E2E_OTLP_TOKEN="+token)
	p := e.cfg.ports

	for _, proto := range []string{buildsim.ProtocolGRPC, buildsim.ProtocolHTTP} {
		t.Run(proto+" refusals", func(t *testing.T) {
			base := simConfig(p, proto, "build-refused", 81)

			noTLS := base
			noTLS.BearerToken = token
			refusedRun(t, noTLS)

			noToken := base
			noToken.CAFile = pki.CAFile
			ex := refusedRun(t, noToken)
			assert.True(t, containsAny(ex.Spans.LastError, "Unauthenticated", "401"), "without a token: %s", ex.Spans.LastError)

			wrong := noToken
			wrong.BearerToken = token + "x"
			ex = refusedRun(t, wrong)
			assert.True(t, containsAny(ex.Spans.LastError, "Unauthenticated", "401"), "wrong token: %s", ex.Spans.LastError)
		})
	}
	t.Run("plain HTTP to the TLS listener", func(t *testing.T) {
		resp, err := http.Post(fmt.Sprintf("http://127.0.0.1:%d/v1/traces", p.HTTP), "application/json", strings.NewReader("{}"))
		if err == nil {
			resp.Body.Close()
			assert.NotEqual(t, http.StatusOK, resp.StatusCode)
		}
	})

	var sums []*buildsim.Summary
	for i, proto := range []string{buildsim.ProtocolGRPC, buildsim.ProtocolHTTP} {
		cfg := simConfig(p, proto, "build-hardened-"+proto, int64(82+i))
		cfg.Jobs = 60
		cfg.CAFile = pki.CAFile
		cfg.BearerToken = token
		sums = append(sums, runSim(t, cfg))
	}
	for _, s := range sums {
		e.waitJobs(30*time.Second, serviceDims(s), totalJobs(s.Generated))
	}
	time.Sleep(2 * e.cfg.FlushInterval)
	e.col.stop(30 * time.Second)
	datums := e.cw.Datums()
	for _, s := range sums {
		checkDerived(t, datums, s.Generated, serviceDims(s), e.cfg.APIFromSpans)
		checkSDKMetrics(t, datums, s.SDKMetrics, serviceDims(s))
	}
	assert.Zero(t, aggregate(datums, mJobs, map[string]string{"service.name": "build-refused"}).Datums, "refused data landed")
	assert.NotContains(t, e.outputs.String(), token, "the bearer token appeared in the collector's output")
}

// The default otelcol-config.yaml, configured only through its environment
// variables, listens on loopback addresses only, and carries buildsim's
// telemetry to CloudWatch end to end.
func TestDefaultConfig(t *testing.T) {
	cw := startCloudWatch(t)
	creds := newAWSCreds(t)
	p := newPorts(t)
	outputs := &allOutput{}
	env := cleanEnv(creds,
		"AWS_REGION=us-east-1",
		"GPUBUILD_CLOUDWATCH_ENDPOINT="+cw.Endpoint(),
		"GPUBUILD_QUEUE_DIR="+t.TempDir(),
		"GPUBUILD_OTLP_GRPC_PORT="+strconv.Itoa(p.GRPC),
		"GPUBUILD_OTLP_HTTP_PORT="+strconv.Itoa(p.HTTP),
		"GPUBUILD_HEALTH_PORT="+strconv.Itoa(p.Health),
		"GPUBUILD_TELEMETRY_PORT="+strconv.Itoa(p.Telemetry),
		"GPUBUILD_FLUSH_INTERVAL=1s",
	)
	col := startCollector(t, filepath.Join(binarytest.RepoRoot(), "otelcol-config.yaml"), p, env, outputs)
	t.Cleanup(func() {
		assert.NotContains(t, outputs.String(), creds.SecretAccessKey)
		assert.NotContains(t, outputs.String(), creds.SessionToken)
	})

	listeners := listeningAddrs(t, col.Pid())
	require.NotEmpty(t, listeners)
	for _, a := range listeners {
		assert.True(t, a.IP.IsLoopback(), "listening on %v, not loopback", a)
	}
	for _, port := range []int{p.GRPC, p.HTTP, p.Health, p.Telemetry} {
		assert.True(t, hasPort(listeners, port), "nothing listens on 127.0.0.1:%d (listeners %v)", port, listeners)
	}

	cfg := simConfig(p, buildsim.ProtocolGRPC, "build-default-config", 91)
	cfg.Jobs = 100
	s := runSim(t, cfg)
	ok := binarytest.Eventually(30*time.Second, func() bool { return jobsLanded(cw, nil) >= totalJobs(s.Generated) })
	require.True(t, ok, "with the default config, %v of %v jobs landed:\n%s", jobsLanded(cw, nil), totalJobs(s.Generated), describeDatums(cw.Datums()))
	time.Sleep(2 * time.Second)
	col.stop(30 * time.Second)

	datums := cw.Datums()
	requireNamespace(t, datums, "GPUIndexBuild")
	// The default config does not add service.name as a dimension; this is
	// the only service, so its truth is the whole.
	checkDerived(t, datums, s.Generated, nil, false)
	checkSDKMetrics(t, datums, s.SDKMetrics, nil)
}

// The AWS secret key and session token given in the environment never
// appear in the collector's logs (at debug level), errors, telemetry or
// printed configuration, while CloudWatch fails in every way it can.
func TestAWSSecretsNeverLogged(t *testing.T) {
	e := newEnv(t, func(c *sidecarConfig) {
		c.LogLevel = "debug"
		c.RetryMaxElapsed = 2 * time.Second // give up, and log it, quickly
	})
	e.cw.SetFaults(cloudwatchtest.Faults{ThrottleEvery: 3, ServerErrorEvery: 5, DropEvery: 7})
	cfg := simConfig(e.cfg.ports, buildsim.ProtocolGRPC, "build-secrets", 95)
	cfg.Jobs = 50
	runSim(t, cfg)
	require.NoError(t, e.cw.SetDown(true))
	time.Sleep(4 * time.Second) // retries exhausted against a refused connection
	require.NoError(t, e.cw.SetDown(false))

	var body strings.Builder
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", e.cfg.Telemetry))
	require.NoError(t, err)
	b := make([]byte, 1<<20)
	for {
		n, rerr := resp.Body.Read(b)
		body.Write(b[:n])
		if rerr != nil {
			break
		}
	}
	resp.Body.Close()
	e.col.stop(30 * time.Second)

	// The subcommands an operator runs to debug a config.
	for _, args := range [][]string{{"print-config", "--config", e.configPath}, {"validate", "--config", e.configPath}} {
		cmd := exec.Command(binarytest.Binary(t), args...)
		cmd.Env = cleanEnv(e.creds)
		out, _ := cmd.CombinedOutput()
		assert.NotContains(t, string(out), e.creds.SecretAccessKey, "%v", args)
		assert.NotContains(t, string(out), e.creds.SessionToken, "%v", args)
	}
	assert.NotContains(t, body.String(), e.creds.SecretAccessKey, "telemetry")
	out := e.outputs.String()
	assert.Contains(t, out, "debug", "the collector did not log at debug level; the test proves less than it claims")
	// The non-secret key id may be logged; the secret parts never.
	assert.NotContains(t, out, e.creds.SecretAccessKey)
	assert.NotContains(t, out, e.creds.SessionToken)
}

// listeningAddrs returns the TCP addresses a process listens on, from its
// socket inodes and the kernel's tcp tables.
func listeningAddrs(t *testing.T, pid int) []*net.TCPAddr {
	t.Helper()
	inodes := map[string]bool{}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	require.NoError(t, err)
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(link, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
		}
	}
	var out []*net.TCPAddr
	for _, table := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		require.NoError(t, err)
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" || !inodes[f[9]] { // 0A: LISTEN
				continue
			}
			out = append(out, parseProcAddr(t, f[1]))
		}
	}
	return out
}

// parseProcAddr decodes /proc/net/tcp's "0100007F:1F90" (address in host
// byte order per 32-bit word, port in hex).
func parseProcAddr(t *testing.T, s string) *net.TCPAddr {
	hexIP, hexPort, _ := strings.Cut(s, ":")
	raw, err := hex.DecodeString(hexIP)
	require.NoError(t, err)
	for i := 0; i+4 <= len(raw); i += 4 {
		raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	port, err := strconv.ParseUint(hexPort, 16, 16)
	require.NoError(t, err)
	return &net.TCPAddr{IP: net.IP(raw), Port: int(port)}
}

func hasPort(addrs []*net.TCPAddr, port int) bool {
	for _, a := range addrs {
		if a.Port == port {
			return true
		}
	}
	return false
}

// hardenedConfigFromDocs extracts the first YAML block of
// docs/hardened-sidecar.md, so that the documented configuration is the one
// tested.
func hardenedConfigFromDocs(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(binarytest.RepoRoot(), "docs", "hardened-sidecar.md"))
	require.NoError(t, err)
	doc := string(b)
	start := strings.Index(doc, "```yaml\n")
	require.GreaterOrEqual(t, start, 0, "no yaml block in docs/hardened-sidecar.md")
	rest := doc[start+len("```yaml\n"):]
	end := strings.Index(rest, "```")
	require.Positive(t, end)
	path := filepath.Join(t.TempDir(), "hardened.yaml")
	require.NoError(t, os.WriteFile(path, []byte(rest[:end]), 0o600))
	return path
}

// The configuration docs/hardened-sidecar.md documents, as written: it
// starts, refuses a client without the token, and carries a TLS client's
// telemetry with the token to CloudWatch exactly.
func TestHardenedConfigFromDocs(t *testing.T) {
	cw := startCloudWatch(t)
	creds := newAWSCreds(t)
	pki := newTestPKI(t)
	token := "hardened-" + hex.EncodeToString([]byte("docs token"))
	tokenFile := filepath.Join(t.TempDir(), "otlp-token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(token+"\n"), 0o600))
	p := newPorts(t)
	outputs := &allOutput{}
	env := cleanEnv(creds,
		"AWS_REGION=us-east-1",
		"GPUBUILD_CLOUDWATCH_ENDPOINT="+cw.Endpoint(),
		"GPUBUILD_QUEUE_DIR="+t.TempDir(),
		"GPUBUILD_TLS_CERT_FILE="+pki.CertFile,
		"GPUBUILD_TLS_KEY_FILE="+pki.KeyFile,
		"GPUBUILD_OTLP_TOKEN_FILE="+tokenFile,
		"GPUBUILD_OTLP_GRPC_PORT="+strconv.Itoa(p.GRPC),
		"GPUBUILD_OTLP_HTTP_PORT="+strconv.Itoa(p.HTTP),
		"GPUBUILD_HEALTH_PORT="+strconv.Itoa(p.Health),
		"GPUBUILD_TELEMETRY_PORT="+strconv.Itoa(p.Telemetry),
		"GPUBUILD_FLUSH_INTERVAL=1s",
	)
	col := startCollector(t, hardenedConfigFromDocs(t), p, env, outputs)

	noToken := simConfig(p, buildsim.ProtocolGRPC, "build-docs-refused", 97)
	noToken.CAFile = pki.CAFile
	refusedRun(t, noToken)

	var sums []*buildsim.Summary
	for i, proto := range []string{buildsim.ProtocolGRPC, buildsim.ProtocolHTTP} {
		cfg := simConfig(p, proto, "build-docs-"+proto, int64(98+i))
		cfg.Jobs = 50
		cfg.CAFile = pki.CAFile
		cfg.BearerToken = token
		sums = append(sums, runSim(t, cfg))
	}
	var want float64
	for _, s := range sums {
		want += totalJobs(s.Generated)
	}
	ok := binarytest.Eventually(30*time.Second, func() bool { return jobsLanded(cw, nil) >= want })
	require.True(t, ok, "%v of %v jobs landed:\n%s", jobsLanded(cw, nil), want, describeDatums(cw.Datums()))
	time.Sleep(2 * time.Second)
	col.stop(30 * time.Second)

	// The documented config has no service.name dimension: the two services'
	// derived metrics add up.
	datums := cw.Datums()
	checkCounter(t, datums, mJobs, nil, want, "Count")
	checkSDKMetrics(t, datums, mergeSDKTruth(sums[0].SDKMetrics, sums[1].SDKMetrics), nil)
	out := outputs.String()
	assert.NotContains(t, out, token, "the bearer token appeared in the collector's output")
	assert.NotContains(t, out, creds.SecretAccessKey)
}

// mergeSDKTruth is the truth of two services' SDK metrics when nothing in
// the datums tells them apart.
func mergeSDKTruth(a, b buildsim.SDKMetrics) buildsim.SDKMetrics {
	hist := func(x, y buildsim.HistogramTruth) buildsim.HistogramTruth {
		out := x
		out.Count += y.Count
		out.Sum += y.Sum
		out.Min = math.Min(x.Min, y.Min)
		out.Max = math.Max(x.Max, y.Max)
		out.Series += y.Series
		return out
	}
	m := a
	m.Counter.Total += b.Counter.Total
	m.Counter.Series += b.Counter.Series
	m.Histogram = hist(a.Histogram, b.Histogram)
	m.HTTPServerDuration = hist(a.HTTPServerDuration, b.HTTPServerDuration)
	m.Gauge.Series += b.Gauge.Series
	return m
}
