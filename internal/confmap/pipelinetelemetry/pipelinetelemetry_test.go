// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package pipelinetelemetry

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"
	"go.yaml.in/yaml/v3"

	"github.com/gpubuild/otelcol-gpubuild/internal/confmap/destinations"
)

func env(vals map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vals[k]; return v, ok }
}

// load reads a shipped configuration with every ${env:NAME:-default} at
// its default, as the Collector hands it to the converters.
func load(t *testing.T, name string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", name))
	require.NoError(t, err)
	raw = regexp.MustCompile(`\$\{env:[A-Z0-9_]+:-([^}]*)\}`).ReplaceAll(raw, []byte("$1"))
	var out map[string]any
	require.NoError(t, yaml.Unmarshal(raw, &out))
	return confmap.NewFromStringMap(out).ToStringMap()
}

func at(m map[string]any, path ...string) any {
	var v any = m
	for _, p := range path {
		v = v.(map[string]any)[p]
	}
	return v
}

func TestDefaultSidecarAndGateway(t *testing.T) {
	for _, file := range []string{"otelcol-config.yaml", "otelcol-gateway.yaml"} {
		t.Run(file, func(t *testing.T) {
			cfg := load(t, file)
			out, err := Apply(cfg, env(nil))
			require.NoError(t, err)

			// The pull endpoint of the shipped telemetry section, read for
			// the series in Series alone.
			require.Equal(t, map[string]any{"url": "http://127.0.0.1:8888/metrics", "collection_interval": "1m0s", "metric_names": seriesList()},
				at(out, "receivers", Receiver))
			require.Contains(t, at(out, "receivers", Receiver, "metric_names"), "otelcol_exporter_queue_capacity")
			// A dozen, and the admission refusals: a delta counter a
			// healthy sidecar never moves, so never sends nor bills.
			require.LessOrEqual(t, len(Series), 13, "a dozen series and the admission refusals at most")
			require.Contains(t, out["connectors"], Connector)
			require.Equal(t, at(cfg, "processors"), out["processors"], "no processor added: the receiver selects")

			require.Equal(t, map[string]any{
				"receivers": []any{Receiver},
				"exporters": []any{Connector},
			}, at(out, "service", "pipelines", Pipeline))
			// The health joins the data where it starts, and leaves the
			// data pipeline as it was otherwise.
			before := at(cfg, "service", "pipelines", "metrics").(map[string]any)
			after := at(out, "service", "pipelines", "metrics").(map[string]any)
			require.Equal(t, append(before["receivers"].([]any), Connector), after["receivers"])
			require.Equal(t, before["exporters"], after["exporters"])
			require.Equal(t, before["processors"], after["processors"])

			require.Equal(t, at(cfg, "service", "telemetry"), at(out, "service", "telemetry"), "the telemetry section stays")

			// Apply does not modify its input.
			require.Equal(t, load(t, file), cfg)
		})
	}
}

func TestSettings(t *testing.T) {
	cfg := load(t, "otelcol-config.yaml")
	readers := at(cfg, "service", "telemetry", "metrics", "readers").([]any)
	prom := at(readers[0].(map[string]any), "pull", "exporter", "prometheus").(map[string]any)
	prom["host"], prom["port"] = "0.0.0.0", 9999
	out, err := Apply(cfg, env(map[string]string{EnvInterval: "2s"}))
	require.NoError(t, err)
	require.Equal(t, map[string]any{"url": "http://127.0.0.1:9999/metrics", "collection_interval": "2s", "metric_names": seriesList()},
		at(out, "receivers", Receiver), "an endpoint on every address is read on loopback")
}

func seriesList() []any {
	var out []any
	for _, s := range Series {
		out = append(out, s)
	}
	return out
}

func TestOffLeavesTheConfigurationAlone(t *testing.T) {
	for name, vals := range map[string]map[string]string{
		"switched off":      {EnvEnabled: "false"},
		"switched off (0)":  {EnvEnabled: " 0 "},
		"metrics off":       {"GPUBUILD_METRICS_ENABLED": "false"},
		"metrics bad value": {"GPUBUILD_METRICS_ENABLED": "maybe"}, // metricsswitch says so
	} {
		t.Run(name, func(t *testing.T) {
			cfg := load(t, "otelcol-config.yaml")
			out, err := Apply(cfg, env(vals))
			require.NoError(t, err)
			require.Equal(t, load(t, "otelcol-config.yaml"), out)
		})
	}
	t.Run("no metrics pipeline", func(t *testing.T) {
		cfg := map[string]any{"service": map[string]any{"pipelines": map[string]any{"traces": map[string]any{}}}}
		out, err := Apply(cfg, env(nil))
		require.NoError(t, err)
		require.Equal(t, cfg, out)
	})
	t.Run("no pull reader", func(t *testing.T) {
		cfg := load(t, "otelcol-config.yaml")
		cfg["service"].(map[string]any)["telemetry"].(map[string]any)["metrics"] = map[string]any{"level": "normal"}
		out, err := Apply(cfg, env(nil))
		require.NoError(t, err)
		require.Equal(t, cfg, out)
	})
}

func TestBadValuesNameTheVariable(t *testing.T) {
	for _, tc := range []struct{ key, val string }{
		{EnvEnabled, "yes please"},
		{EnvInterval, "soon"},
		{EnvInterval, "500ms"},
	} {
		_, err := Apply(load(t, "otelcol-config.yaml"), env(map[string]string{tc.key: tc.val}))
		require.ErrorContains(t, err, tc.key, "%s=%q", tc.key, tc.val)
	}
}

// With several destinations the health joins the metrics pipeline before
// the fanout, so every store gets it.
func TestReachesEveryDestination(t *testing.T) {
	vals := env(map[string]string{destinations.EnvDestinations: "cloudwatch,prometheus"})
	withDest, err := destinations.Apply(load(t, "otelcol-config.yaml"), vals)
	require.NoError(t, err)
	out, err := Apply(withDest, vals)
	require.NoError(t, err)
	metrics := at(out, "service", "pipelines", "metrics").(map[string]any)
	require.Contains(t, metrics["receivers"], Connector)
	require.Equal(t, []any{"fanout/destinations"}, metrics["exporters"])
}
