// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package retiredenv

import (
	"context"
	"path/filepath"
	"strings"
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

func load(t *testing.T, file string) *confmap.Conf {
	t.Helper()
	conf, err := confmaptest.LoadConf(filepath.Join("..", "..", "..", file))
	require.NoError(t, err)
	return conf
}

// The shipped sidecar config caps its queue in bytes: GPUBUILD_QUEUE_SIZE
// left over from an older release gets one line naming what to set.
func TestQueueSizeLeftOverIsNamed(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	c := &converter{logger: zap.New(core), lookupEnv: env(map[string]string{EnvQueueSize: "5000"})}
	conf := load(t, "otelcol-config.yaml")
	before := conf.ToStringMap()
	require.NoError(t, c.Convert(context.Background(), conf))
	assert.Equal(t, before, conf.ToStringMap(), "the configuration is unchanged")
	lines := logs.FilterLevelExact(zap.WarnLevel).All()
	require.Len(t, lines, 1)
	assert.Contains(t, lines[0].Message, `GPUBUILD_QUEUE_SIZE is no longer read (set to "5000")`)
	assert.Contains(t, lines[0].Message, "exporter cloudwatch")
	assert.Contains(t, lines[0].Message, "set GPUBUILD_QUEUE_BYTES (bytes, default 268435456")
}

func TestValidateGetsTheLineOnItsOutput(t *testing.T) {
	var out strings.Builder
	c := &converter{validate: &out, lookupEnv: env(map[string]string{EnvQueueSize: "5000"})}
	require.NoError(t, c.Convert(context.Background(), load(t, "otelcol-config.yaml")))
	assert.True(t, strings.HasPrefix(out.String(), "warn: GPUBUILD_QUEUE_SIZE is no longer read"), out.String())
	assert.Equal(t, 1, strings.Count(out.String(), "\n"))
}

func TestNothingToSayWhenUnsetOrStillRead(t *testing.T) {
	assert.Empty(t, Warnings(load(t, "otelcol-config.yaml").ToStringMap(), env(nil)), "not set")
	// The gateway still caps its queue in requests with GPUBUILD_QUEUE_SIZE.
	assert.Empty(t, Warnings(load(t, "otelcol-gateway.yaml").ToStringMap(), env(map[string]string{EnvQueueSize: "5000"})))
}
