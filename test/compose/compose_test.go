// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package compose

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/podmantest"
)

// holdExact is how long what landed must stay exact: two of the shipped
// config's 10 s flushes and the SDK's 10 s metric export (the shipped file's
// OTEL_METRIC_EXPORT_INTERVAL), past which nothing more is due.
const holdExact = 20 * time.Second

// TestComposeUpStopUp brings the shipped file up (the sidecar image and the
// JavaScript SDK build service's image), requires that the service starts
// only after the sidecar passed its health check, runs builds through the
// published port and requires what landed at the CloudWatch endpoint to
// equal the service's own count; then `docker-compose stop` (within the
// sidecar's stop_grace_period, both exiting 0) and `up` again on the same
// queue volume: a new service process, more builds, and the sum of both
// processes' counts lands exactly, once.
func TestComposeUpStopUp(t *testing.T) {
	image := imageFromEnv("OTELCOL_GPUBUILD_IMAGE", defaultImage)
	serviceImage := imageFromEnv("GPUBUILD_JSSERVICE_IMAGE", defaultServiceImage)
	podmantest.RequireImage(t, image, "image")
	podmantest.RequireImage(t, serviceImage, "jsservice-image")
	file := readShipped(t)

	// The containers reach the host's CloudWatch endpoint at podman's
	// host.containers.internal (the network's gateway).
	cw, err := cloudwatchtest.Start("0.0.0.0:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = cw.Close() })
	u, err := url.Parse(cw.Endpoint())
	require.NoError(t, err)
	port := binarytest.FreePort(t)
	e := startEngine(t)
	p := newProject(t, e, fmt.Sprintf(`services:
  %s:
    image: %s
    environment:
      GPUBUILD_CLOUDWATCH_ENDPOINT: http://host.containers.internal:%s
      AWS_EC2_METADATA_DISABLED: "true"
`, sidecarService, image, u.Port()),
		// What a user sets for the shipped file.
		"BUILD_SERVICE_IMAGE="+serviceImage,
		fmt.Sprintf("BUILD_SERVICE_PORT=%d", port),
		"AWS_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=AKIDCOMPOSE000000001",
		"AWS_SECRET_ACCESS_KEY=composeTestSecretNotUsedAnywhere",
		"GPUBUILD_CLOUDWATCH_OUTPUT=cloudwatch",
	)

	begin := time.Now()
	healthy := p.upWhileHealthChecking(func(sidecar string) {
		// The collector is up and only the health check is missing: the
		// service must not have been started.
		ok := binarytest.Eventually(60*time.Second, func() bool {
			logs, _ := podmantest.Logs(sidecar)
			return strings.Contains(logs, "Everything is ready")
		})
		require.True(t, ok, "the sidecar never became ready")
		assert.Equal(t, "starting", p.healthStatus(sidecar), "podman's health status before any health check ran")
		svc, err := p.container(buildService)
		require.NoError(t, err)
		assert.Empty(t, svc, "the service's container exists before the sidecar was healthy")
	})
	require.False(t, healthy.IsZero(), "docker-compose up returned before the sidecar passed a health check")
	sidecar, err := p.container(sidecarService)
	require.NoError(t, err)
	assert.Equal(t, "healthy", p.healthStatus(sidecar))
	svc, err := p.container(buildService)
	require.NoError(t, err)
	require.NotEmpty(t, svc, "no container of %s after up", buildService)
	started := p.state(svc).StartedAt
	assert.True(t, started.After(healthy), "the service started at %v, before the sidecar's first passing health check at %v", started, healthy)

	c := &client{t: t, base: fmt.Sprintf("http://127.0.0.1:%d", port)}
	c.awaitAnswers()
	t.Logf("up: %v", time.Since(begin).Round(time.Millisecond))
	first := c.wave("first", 20)
	t.Logf("first wave: %v", time.Since(begin).Round(time.Millisecond))
	// The second wave's check covers duplicates of the first.
	awaitExact(t, cw, file.serviceName, first, 2*time.Minute, 0)
	t.Logf("first exact: %v", time.Since(begin).Round(time.Millisecond))

	took := p.stop()
	t.Logf("docker-compose stop: %v (stop_grace_period %v)", took.Round(time.Millisecond), file.grace)
	assert.Less(t, took, file.grace, "docker-compose stop")
	for _, name := range []string{sidecar, svc} {
		st := p.state(name)
		assert.False(t, st.Running, "%s still runs after stop", name)
		assert.Equal(t, 0, st.ExitCode, "%s's exit status after SIGTERM", name)
	}
	logs, err := podmantest.Logs(sidecar)
	require.NoError(t, err)
	assert.Contains(t, logs, "Shutdown complete")

	// Up again: the same containers and queue volume, a new service process.
	p.upWhileHealthChecking(nil)
	c.awaitAnswers()
	restarted, err := c.truth()
	require.NoError(t, err)
	require.Empty(t, restarted.Jobs, "the service's count after up: a new process")
	t.Logf("up again: %v", time.Since(begin).Round(time.Millisecond))
	second := c.wave("second", 15)
	awaitExact(t, cw, file.serviceName, first.add(second), 2*time.Minute, holdExact)
	t.Logf("second exact: %v", time.Since(begin).Round(time.Millisecond))

	for service, name := range map[string]string{sidecarService: sidecar, buildService: svc} {
		now, err := p.container(service)
		require.NoError(t, err)
		assert.Equal(t, name, now, "%s's container after the second up", service)
		assert.True(t, p.state(name).Running, "%s after the second up", name)
	}
}
