// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package nvmlsamplerextension

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"
)

func TestConfigDefaultsAndUnmarshal(t *testing.T) {
	cfg := createDefaultConfig()
	require.NoError(t, cfg.Validate())
	assert.Equal(t, time.Second, cfg.SamplingInterval)
	assert.Equal(t, 35*time.Minute, cfg.Retention)
	assert.Equal(t, time.Minute, cfg.InitRetryInterval)
	assert.Equal(t, 15*time.Minute, cfg.InitRetryMaxInterval)

	conf := confmap.NewFromStringMap(map[string]any{"sampling_interval": "250ms", "retention": "10m", "init_retry_interval": "5s", "init_retry_max_interval": "5s"})
	require.NoError(t, conf.Unmarshal(cfg))
	require.NoError(t, cfg.Validate())
	assert.Equal(t, 250*time.Millisecond, cfg.SamplingInterval)
	assert.Equal(t, 10*60*4+2, cfg.ticks())
	assert.Equal(t, 5*time.Second, cfg.InitRetryMaxInterval)
}

func TestConfigErrorsNameTheField(t *testing.T) {
	for name, tc := range map[string]struct {
		mutate func(*Config)
		want   string
	}{
		"zero interval":          {func(c *Config) { c.SamplingInterval = 0 }, "sampling_interval: must be positive"},
		"negative retry":         {func(c *Config) { c.InitRetryInterval = -time.Second }, "init_retry_interval: must be positive"},
		"zero retry max":         {func(c *Config) { c.InitRetryMaxInterval = 0 }, "init_retry_max_interval: must be positive"},
		"retry max under retry":  {func(c *Config) { c.InitRetryMaxInterval = 30 * time.Second }, "init_retry_max_interval: must be at least init_retry_interval (1m0s), got 30s"},
		"zero retention":         {func(c *Config) { c.Retention = 0 }, "retention: must be positive"},
		"retention under a tick": {func(c *Config) { c.Retention = 500 * time.Millisecond }, "retention: must be at least sampling_interval"},
		"ring too large":         {func(c *Config) { c.SamplingInterval = time.Millisecond; c.Retention = 24 * time.Hour }, "retention: at most"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := createDefaultConfig()
			tc.mutate(cfg)
			assert.ErrorContains(t, cfg.Validate(), tc.want)
		})
	}
}

func TestRingKeepsTheNewestAndSpansAWindow(t *testing.T) {
	base := time.Unix(1000, 0)
	sec := func(s int) time.Time { return base.Add(time.Duration(s) * time.Second) }
	r := newRing(4, func(v *time.Time) time.Time { return *v })
	_, ok := r.newest()
	assert.False(t, ok)
	assert.Nil(t, r.span(sec(0), sec(1)))
	for s := range 6 { // 0..5; capacity 4 keeps 2..5
		r.push(sec(s))
	}
	newest, ok := r.newest()
	require.True(t, ok)
	assert.Equal(t, sec(5), newest)
	// From the last at or before from to the first at or after to.
	assert.Equal(t, []time.Time{sec(2), sec(3), sec(4)}, r.span(sec(2), sec(4)))
	assert.Equal(t, []time.Time{sec(2), sec(3), sec(4)}, r.span(base.Add(2500*time.Millisecond), base.Add(3500*time.Millisecond)))
	// Beyond either end: the oldest and the newest kept, so the caller sees
	// the window is not covered.
	assert.Equal(t, []time.Time{sec(2), sec(3)}, r.span(sec(0), base.Add(2500*time.Millisecond)))
	assert.Equal(t, []time.Time{sec(4), sec(5)}, r.span(base.Add(4500*time.Millisecond), sec(9)))
}
