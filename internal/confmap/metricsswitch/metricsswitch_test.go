// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package metricsswitch

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func env(vals map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vals[k]; return v, ok }
}

func TestEnabled(t *testing.T) {
	for _, tc := range []struct {
		val     *string
		want    bool
		wantErr string
	}{
		{val: nil, want: true},
		{val: ptr(""), want: true},
		{val: ptr("true"), want: true},
		{val: ptr("1"), want: true},
		{val: ptr("false"), want: false},
		{val: ptr(" FALSE "), want: false},
		{val: ptr("0"), want: false},
		{val: ptr("nope"), wantErr: `GPUBUILD_METRICS_ENABLED: "nope" is not a boolean`},
	} {
		vals := map[string]string{}
		if tc.val != nil {
			vals[EnvVar] = *tc.val
		}
		got, err := Enabled(env(vals))
		if tc.wantErr != "" {
			require.ErrorContains(t, err, tc.wantErr)
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, tc.want, got, "value %v", tc.val)
	}
}

func ptr(s string) *string { return &s }

func TestDisableDefaultConfig(t *testing.T) {
	conf, err := confmaptest.LoadConf(filepath.Join("..", "..", "..", "otelcol-config.yaml"))
	require.NoError(t, err)
	orig := conf.ToStringMap()

	out, err := Disable(orig)
	require.NoError(t, err)

	pipelines := out["service"].(map[string]any)["pipelines"].(map[string]any)
	require.Len(t, pipelines, 3, "traces, logs and metrics keep their otlp receiver")
	for id, p := range pipelines {
		p := p.(map[string]any)
		assert.Equal(t, []any{"otlp"}, p["receivers"], "pipeline %s: only otlp stays (no nvml scrape, no connector)", id)
		assert.Equal(t, []any{disabledExporter}, p["exporters"], "pipeline %s", id)
		assert.NotContains(t, p, "processors", "pipeline %s", id)
	}
	exporters := out["exporters"].(map[string]any)
	assert.Contains(t, exporters, disabledExporter)
	assert.Contains(t, exporters, "cloudwatch", "definitions stay; the collector ignores unused ones")
	assert.Equal(t, orig["extensions"], out["extensions"], "health_check keeps reporting")

	// The input is not modified.
	origPipelines := orig["service"].(map[string]any)["pipelines"].(map[string]any)
	assert.Contains(t, origPipelines["metrics"].(map[string]any)["receivers"], "nvml")
}

func TestDisableDropsPipelinesWithoutOTLP(t *testing.T) {
	cfg := map[string]any{
		"service": map[string]any{"pipelines": map[string]any{
			"metrics/gpu": map[string]any{"receivers": []any{"nvml"}, "exporters": []any{"cloudwatch"}},
			"metrics":     map[string]any{"receivers": []any{"otlp/in", "nvml"}, "exporters": []any{"cloudwatch"}},
		}},
	}
	out, err := Disable(cfg)
	require.NoError(t, err)
	pipelines := out["service"].(map[string]any)["pipelines"].(map[string]any)
	assert.Equal(t, map[string]any{
		"metrics": map[string]any{"receivers": []any{"otlp/in"}, "exporters": []any{disabledExporter}},
	}, pipelines)
}

func TestDisableWithoutOTLPFails(t *testing.T) {
	_, err := Disable(map[string]any{"service": map[string]any{"pipelines": map[string]any{
		"metrics": map[string]any{"receivers": []any{"nvml"}, "exporters": []any{"cloudwatch"}},
	}}})
	require.ErrorContains(t, err, "no pipeline has an otlp receiver")

	_, err = Disable(map[string]any{})
	require.ErrorContains(t, err, "service::pipelines is empty")
}

func TestConvertLogsOnceAndRewrites(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	c := &converter{logger: zap.New(core), lookupEnv: env(map[string]string{EnvVar: "false"})}
	conf := confmap.NewFromStringMap(map[string]any{"service": map[string]any{"pipelines": map[string]any{
		"metrics": map[string]any{"receivers": []any{"otlp", "nvml"}, "exporters": []any{"cloudwatch"}},
	}}})
	require.NoError(t, c.Convert(context.Background(), conf))
	assert.Equal(t, []any{"otlp"}, conf.Get("service::pipelines::metrics::receivers"))
	require.Equal(t, 1, logs.Len())
	assert.Contains(t, logs.All()[0].Message, "GPUBUILD_METRICS_ENABLED=false")
}

func TestConvertEnabledLeavesConfigAlone(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	c := &converter{logger: zap.New(core), lookupEnv: env(nil)}
	in := map[string]any{"service": map[string]any{"pipelines": map[string]any{
		"metrics": map[string]any{"receivers": []any{"nvml"}, "exporters": []any{"cloudwatch"}},
	}}}
	conf := confmap.NewFromStringMap(in)
	require.NoError(t, c.Convert(context.Background(), conf))
	assert.Equal(t, in, conf.ToStringMap())
	assert.Zero(t, logs.Len())
}

func TestConvertRejectsBadValue(t *testing.T) {
	c := &converter{logger: zap.NewNop(), lookupEnv: env(map[string]string{EnvVar: "maybe"})}
	err := c.Convert(context.Background(), confmap.New())
	require.ErrorContains(t, err, EnvVar)
}
