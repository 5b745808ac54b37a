// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
)

func readRepoFile(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(binarytest.RepoRoot(), rel))
	require.NoError(t, err)
	return string(b)
}

// TestGatewayManifestsAgreeWithTheConfigs: the Kubernetes manifests run the
// config the image ships, set only variables the gateway config reads, run
// as non-root with probes on the health check port, and name the headless
// Service the sidecar config's example resolver points at.
func TestGatewayManifestsAgreeWithTheConfigs(t *testing.T) {
	kinds := map[string]map[string]any{}
	dec := yaml.NewDecoder(bytes.NewReader([]byte(readRepoFile(t, "deploy/gateway-kubernetes.yaml"))))
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		kind := doc["kind"].(string)
		switch {
		case kind == "Service" && dig(doc, "metadata", "name") == "otelcol-gateway-handoff":
			kind = "hand-off Service" // every gateway, ready or not
		case kind == "Service" && dig(doc, "spec", "clusterIP") == "None":
			kind = "headless Service" // the StatefulSet's pods' names
		}
		kinds[kind] = doc
	}
	require.Subset(t, keys(kinds), []string{"StatefulSet", "Service", "headless Service", "hand-off Service", "HorizontalPodAutoscaler", "PodDisruptionBudget"})

	// The config path in the image.
	dockerfile := readRepoFile(t, "Dockerfile")
	assert.Contains(t, dockerfile, "/src/otelcol-gateway.yaml /etc/otelcol-gpubuild/gateway.yaml")

	pod := dig(kinds["StatefulSet"], "spec", "template", "spec").(map[string]any)
	assert.Equal(t, true, dig(pod, "securityContext", "runAsNonRoot"))
	c := pod["containers"].([]any)[0].(map[string]any)
	assert.Equal(t, []any{"--config", "/etc/otelcol-gpubuild/gateway.yaml", gatewayFeatureGate}, c["args"])

	gatewayVars := envNames(readRepoFile(t, "otelcol-gateway.yaml"))
	for _, e := range c["env"].([]any) {
		name := e.(map[string]any)["name"].(string)
		if strings.HasPrefix(name, "GPUBUILD_") {
			assert.Contains(t, gatewayVars, name, "the gateway config reads %s", name)
		}
	}
	for _, probe := range []string{"startupProbe", "readinessProbe", "livenessProbe"} {
		assert.Equal(t, "health", dig(c, probe, "httpGet", "port"), probe)
	}
	// Readiness follows the journal and the sends; liveness and startup
	// only the process (TestGatewayReadinessFollowsItsJournalAndItsSends).
	assert.Equal(t, readinessPath, dig(c, "readinessProbe", "httpGet", "path"))
	assert.Equal(t, livenessPath, dig(c, "livenessProbe", "httpGet", "path"))
	assert.Equal(t, livenessPath, dig(c, "startupProbe", "httpGet", "path"))
	ports := map[string]int{}
	for _, p := range c["ports"].([]any) {
		ports[p.(map[string]any)["name"].(string)] = p.(map[string]any)["containerPort"].(int)
	}
	assert.Equal(t, map[string]int{"otlp-grpc": 4317, "otlp-handoff": 4319, "health": 13133, "telemetry": 8888}, ports, "the gateway config's default ports")

	// Hand-offs go to every gateway, ready or not (through a CloudWatch
	// outage none is ready), on the hand-off port
	// (TestGatewayLeavingHandsItsBacklogToAPeer).
	handoff := kinds["hand-off Service"]
	assert.Equal(t, "None", dig(handoff, "spec", "clusterIP"))
	assert.Equal(t, true, dig(handoff, "spec", "publishNotReadyAddresses"))
	assert.Equal(t, map[string]any{"app": "otelcol-gateway"}, dig(handoff, "spec", "selector"))
	assert.Equal(t, []any{map[string]any{"name": "otlp-handoff", "port": 4319, "targetPort": "otlp-handoff"}}, dig(handoff, "spec", "ports"))
	handoffHost := dig(handoff, "metadata", "name").(string) + "." + dig(handoff, "metadata", "namespace").(string) + ".svc.cluster.local"
	var endpoint string
	for _, e := range c["env"].([]any) {
		if e.(map[string]any)["name"] == "GPUBUILD_GATEWAY_HANDOFF_ENDPOINT" {
			endpoint = e.(map[string]any)["value"].(string)
		}
	}
	assert.Equal(t, "dns:///"+handoffHost+":4319", endpoint)

	svc := kinds["Service"]
	assert.Nil(t, dig(svc, "spec", "clusterIP"), "a load-balanced Service: each sidecar's connection lands on one gateway")
	host := dig(svc, "metadata", "name").(string) + "." + dig(svc, "metadata", "namespace").(string) + ".svc.cluster.local"
	assert.Contains(t, readRepoFile(t, "deploy/gateway-kubernetes.yaml"), "GPUBUILD_DESTINATIONS=gateway", "the sidecars run the default configuration")
	assert.Contains(t, readRepoFile(t, "deploy/gateway-kubernetes.yaml"), "GPUBUILD_GATEWAY_ENDPOINT="+host+":4317")
	assert.Equal(t, "otelcol-gateway", dig(kinds["HorizontalPodAutoscaler"], "spec", "scaleTargetRef", "name"))
	assert.Equal(t, "StatefulSet", dig(kinds["HorizontalPodAutoscaler"], "spec", "scaleTargetRef", "kind"))
	assert.Equal(t, 1, dig(kinds["PodDisruptionBudget"], "spec", "minAvailable"))
}

func keys(m map[string]map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func dig(v any, path ...string) any {
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

func envNames(config string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`\$\{env:([A-Z0-9_]+)`).FindAllStringSubmatch(config, -1) {
		out = append(out, m[1])
	}
	return out
}

// TestGatewayManifestKeepsWhatWasAcknowledged: each gateway's queue
// directory is a claim of its own that a scale-down or a deleted
// StatefulSet keeps, written with fsync (the claim outlives the node), and
// the grace period covers the preStop wait, the drain and the hand-off.
func TestGatewayManifestKeepsWhatWasAcknowledged(t *testing.T) {
	var sts map[string]any
	dec := yaml.NewDecoder(bytes.NewReader([]byte(readRepoFile(t, "deploy/gateway-kubernetes.yaml"))))
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		if doc["kind"] == "StatefulSet" {
			sts = doc
		}
	}
	require.NotNil(t, sts)
	assert.Equal(t, map[string]any{"whenDeleted": "Retain", "whenScaled": "Retain"}, dig(sts, "spec", "persistentVolumeClaimRetentionPolicy"))
	claims := dig(sts, "spec", "volumeClaimTemplates").([]any)
	require.Len(t, claims, 1)
	pod := dig(sts, "spec", "template", "spec").(map[string]any)
	c := pod["containers"].([]any)[0].(map[string]any)
	env := map[string]string{}
	for _, e := range c["env"].([]any) {
		env[e.(map[string]any)["name"].(string)] = e.(map[string]any)["value"].(string)
	}
	var mounted bool
	for _, m := range c["volumeMounts"].([]any) {
		m := m.(map[string]any)
		mounted = mounted || (m["name"] == dig(claims[0], "metadata", "name") && m["mountPath"] == env["GPUBUILD_QUEUE_DIR"])
	}
	assert.True(t, mounted, "the claim is the queue directory")
	assert.Nil(t, pod["volumes"], "no emptyDir")
	assert.Equal(t, "true", env["GPUBUILD_GATEWAY_FSYNC"])

	drain, err := time.ParseDuration(env["GPUBUILD_SHUTDOWN_DRAIN_TIMEOUT"])
	require.NoError(t, err)
	preStop := time.Duration(dig(c, "lifecycle", "preStop", "sleep", "seconds").(int)) * time.Second
	grace := time.Duration(pod["terminationGracePeriodSeconds"].(int)) * time.Second
	// The retrying request's next attempt (at most 1.5 times the retry's
	// max_interval), when the hand-off starts, and the hand-off.
	retry, err := time.ParseDuration(env["GPUBUILD_GATEWAY_RETRY_MAX_INTERVAL"])
	require.NoError(t, err)
	handoff, err := time.ParseDuration(env["GPUBUILD_GATEWAY_HANDOFF_TIMEOUT"])
	require.NoError(t, err)
	// Room for the receiver's stop, the hand-over and a call in flight
	// (the exporter's request_timeout, 18 s).
	assert.GreaterOrEqual(t, grace, preStop+drain+retry*3/2+handoff+30*time.Second)
}
