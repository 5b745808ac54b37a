// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/promtext"
)

// env is one scenario's world: the CloudWatch test endpoint, fake AWS
// credentials and the collector running testdata/sidecar.yaml.tmpl.
type env struct {
	t          *testing.T
	cw         *cloudwatchtest.Server
	creds      awsCreds
	outputs    *allOutput
	cfg        sidecarConfig
	configPath string
	extraEnv   []string
	col        *collector
}

// newEnv starts the endpoint and the collector; edit changes the config
// first. At the end of the test it checks that no output of any collector
// run showed the AWS secret key or session token.
func newEnv(t *testing.T, edit func(*sidecarConfig), extraEnv ...string) *env {
	t.Helper()
	e := &env{t: t, cw: startCloudWatch(t), creds: newAWSCreds(t), outputs: &allOutput{}, extraEnv: extraEnv}
	e.cfg = defaultSidecarConfig(t, newPorts(t), e.cw)
	if edit != nil {
		edit(&e.cfg)
	}
	e.configPath = renderConfig(t, "sidecar.yaml.tmpl", e.cfg)
	t.Cleanup(func() { e.checkNoSecrets() })
	e.col = e.start()
	return e
}

func (e *env) start() *collector {
	return startCollector(e.t, e.configPath, e.cfg.ports, cleanEnv(e.creds, e.extraEnv...), e.outputs)
}

func (e *env) checkNoSecrets() {
	out := e.outputs.String()
	assert.NotContains(e.t, out, e.creds.SecretAccessKey, "the AWS secret key appeared in the collector's output")
	assert.NotContains(e.t, out, e.creds.SessionToken, "the AWS session token appeared in the collector's output")
}

// waitJobs waits until want build.jobs have landed for dims, and fails
// with a summary of what landed otherwise.
func (e *env) waitJobs(timeout time.Duration, dims map[string]string, want float64) {
	e.t.Helper()
	ok := binarytest.Eventually(timeout, func() bool { return jobsLanded(e.cw, dims) >= want })
	require.True(e.t, ok, "build.jobs%v: %v landed within %v, want %v\n%s", dims, jobsLanded(e.cw, dims), timeout, want, describeDatums(e.cw.Datums()))
}

// scrape returns the collector's telemetry, failing the test when it is
// not reachable.
func (e *env) scrape() promtext.Families {
	e.t.Helper()
	s, err := e.col.telemetry()
	require.NoError(e.t, err)
	return s
}

// requireMetric returns a telemetry value that must exist.
func requireMetric(t *testing.T, samples promtext.Families, name string, labels map[string]string) float64 {
	t.Helper()
	v, ok := samples.Sum(name, labels)
	require.True(t, ok, "telemetry has no %s%v; it has: %s", name, labels, samples.Names())
	return v
}

func requireNamespace(t *testing.T, datums []cloudwatchtest.Datum, ns string) {
	t.Helper()
	bad := map[string]int{}
	for _, d := range datums {
		if d.Namespace != ns {
			bad[d.Namespace]++
		}
	}
	assert.Empty(t, bad, "datums outside namespace %s", ns)
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
