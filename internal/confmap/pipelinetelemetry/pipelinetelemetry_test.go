// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package pipelinetelemetry

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/gpubuild/otelcol-gpubuild/internal/confmap/destinations"
)

func env(vals map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vals[k]; return v, ok }
}

// on is env with the switch on.
func on(vals map[string]string) func(string) (string, bool) {
	m := map[string]string{EnvEnabled: "true"}
	for k, v := range vals {
		m[k] = v
	}
	return env(m)
}

func port(p int) func() (int, error) { return func() (int, error) { return p, nil } }

func load(t *testing.T, name string) map[string]any {
	t.Helper()
	conf, err := confmaptest.LoadConf(filepath.Join("..", "..", "..", name))
	require.NoError(t, err)
	return conf.ToStringMap()
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
			out, err := Apply(cfg, on(nil), port(40123))
			require.NoError(t, err)

			require.Equal(t, map[string]any{"protocols": map[string]any{"http": map[string]any{"endpoint": "127.0.0.1:40123"}}},
				at(out, "receivers", Receiver))
			require.Equal(t, FilterConfig(), at(out, "processors", Filter))
			require.Contains(t, at(out, "processors", Filter, "metrics", "metric").([]any)[0], "|otelcol_exporter_queue_capacity|")
			require.LessOrEqual(t, len(Series), 12, "a dozen series at most")
			require.Contains(t, out["connectors"], Connector)

			require.Equal(t, map[string]any{
				"receivers":  []any{Receiver},
				"processors": []any{Filter},
				"exporters":  []any{Connector},
			}, at(out, "service", "pipelines", Pipeline))
			// The health joins the data where it starts, and leaves the
			// data pipeline as it was otherwise.
			before := at(cfg, "service", "pipelines", "metrics").(map[string]any)
			after := at(out, "service", "pipelines", "metrics").(map[string]any)
			require.Equal(t, append(before["receivers"].([]any), Connector), after["receivers"])
			require.Equal(t, before["exporters"], after["exporters"])
			require.Equal(t, before["processors"], after["processors"])

			readers := at(out, "service", "telemetry", "metrics", "readers").([]any)
			require.Len(t, readers, 2)
			require.Equal(t, at(cfg, "service", "telemetry", "metrics", "readers").([]any)[0], readers[0], "the pull reader stays")
			require.Equal(t, map[string]any{"periodic": map[string]any{
				"interval": int64(60000),
				"timeout":  int64(2000),
				"exporter": map[string]any{"otlp": map[string]any{
					"protocol":               "http/protobuf",
					"endpoint":               "http://127.0.0.1:40123/v1/metrics",
					"temporality_preference": "delta",
				}},
			}}, readers[1])

			// Apply does not modify its input.
			require.Equal(t, load(t, file), cfg)
		})
	}
}

func TestSettings(t *testing.T) {
	cfg := load(t, "otelcol-config.yaml")
	out, err := Apply(cfg, on(map[string]string{EnvInterval: "2s", EnvPort: "4400"}), func() (int, error) {
		return 0, errors.New("not asked for when the port is set")
	})
	require.NoError(t, err)
	reader := at(out, "service", "telemetry", "metrics", "readers").([]any)[1].(map[string]any)
	require.Equal(t, int64(2000), at(reader, "periodic", "interval"))
	require.Equal(t, int64(2000), at(reader, "periodic", "timeout"), "the timeout is at most the interval")
	require.Equal(t, "http://127.0.0.1:4400/v1/metrics", at(reader, "periodic", "exporter", "otlp", "endpoint"))
}

func TestOffLeavesTheConfigurationAlone(t *testing.T) {
	for name, vals := range map[string]map[string]string{
		"default":           {},
		"switched off":      {EnvEnabled: "false"},
		"switched off (0)":  {EnvEnabled: " 0 "},
		"metrics off":       {EnvEnabled: "true", "GPUBUILD_METRICS_ENABLED": "false"},
		"metrics bad value": {EnvEnabled: "true", "GPUBUILD_METRICS_ENABLED": "maybe"}, // metricsswitch says so
	} {
		t.Run(name, func(t *testing.T) {
			cfg := load(t, "otelcol-config.yaml")
			out, err := Apply(cfg, env(vals), port(1))
			require.NoError(t, err)
			require.Equal(t, load(t, "otelcol-config.yaml"), out)
		})
	}
	t.Run("no metrics pipeline", func(t *testing.T) {
		cfg := map[string]any{"service": map[string]any{"pipelines": map[string]any{"traces": map[string]any{}}}}
		out, err := Apply(cfg, on(nil), port(1))
		require.NoError(t, err)
		require.Equal(t, cfg, out)
	})
}

func TestBadValuesNameTheVariable(t *testing.T) {
	for _, tc := range []struct{ key, val string }{
		{EnvEnabled, "yes please"},
		{EnvInterval, "soon"},
		{EnvInterval, "500ms"},
		{EnvPort, "http"},
		{EnvPort, "70000"},
	} {
		_, err := Apply(load(t, "otelcol-config.yaml"), on(map[string]string{tc.key: tc.val}), port(1))
		require.ErrorContains(t, err, tc.key, "%s=%q", tc.key, tc.val)
	}
	_, err := Apply(load(t, "otelcol-config.yaml"), on(nil), func() (int, error) { return 0, errors.New("no ports left") })
	require.ErrorContains(t, err, EnvPort)
}

// With several destinations the health joins the metrics pipeline before
// the fanout, so every store gets it.
func TestReachesEveryDestination(t *testing.T) {
	vals := on(map[string]string{destinations.EnvDestinations: "cloudwatch,prometheus"})
	withDest, err := destinations.Apply(load(t, "otelcol-config.yaml"), vals)
	require.NoError(t, err)
	out, err := Apply(withDest, vals, port(40123))
	require.NoError(t, err)
	metrics := at(out, "service", "pipelines", "metrics").(map[string]any)
	require.Contains(t, metrics["receivers"], Connector)
	require.Equal(t, []any{"fanout/destinations"}, metrics["exporters"])
}

func TestFreeLoopbackPort(t *testing.T) {
	p, err := freeLoopbackPort()
	require.NoError(t, err)
	require.Positive(t, p)
}
