// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package intervalmergeprocessor

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gpubuild/otelcol-gpubuild/processor/intervalmergeprocessor/internal/metadata"
)

func TestConfigValidate(t *testing.T) {
	require.NoError(t, createDefaultConfig().Validate())

	cfg := createDefaultConfig()
	cfg.Interval = 0
	cfg.DropResourceAttributes = []string{"host.name", ""}
	cfg.KeepPerWorker = []string{""}
	err := cfg.Validate()
	require.Error(t, err)
	assert.ErrorContains(t, err, "interval: must be positive")
	assert.ErrorContains(t, err, "drop_resource_attributes[1]")
	assert.ErrorContains(t, err, "keep_per_worker[0]")

	cfg = createDefaultConfig()
	cfg.Interval = -time.Second
	assert.ErrorContains(t, cfg.Validate(), "interval")
}

// The journal block of an earlier release is still read, as state.journal,
// and Start says under which key it belongs now.
func TestLegacyJournalKeyIsReadAsStateJournal(t *testing.T) {
	dir := t.TempDir()
	conf := confmap.NewFromStringMap(map[string]any{
		"interval": "1m",
		"journal":  map[string]any{"directory": dir, "fsync": true, "max_bytes": 4096},
	})
	cfg := createDefaultConfig()
	require.NoError(t, conf.Unmarshal(cfg))
	require.NoError(t, cfg.Validate())
	assert.Equal(t, JournalConfig{Directory: dir, Fsync: true, MaxBytes: 4096}, cfg.State.Journal)
	assert.True(t, cfg.legacyJournalKey)

	both := confmap.NewFromStringMap(map[string]any{
		"journal": map[string]any{"directory": dir},
		"state":   map[string]any{"journal": map[string]any{"directory": dir}},
	})
	assert.ErrorContains(t, both.Unmarshal(createDefaultConfig()), "journal: set state.journal instead")

	cfg.State.Journal.MaxBytes = 0
	assert.ErrorContains(t, cfg.Validate(), "state.journal.max_bytes: must be positive")

	core, logs := observer.New(zap.WarnLevel)
	set := processortest.NewNopSettings(metadata.Type)
	set.Logger = zap.New(core)
	cfg.State.Journal.MaxBytes = 4096
	p, err := newMergeProcessor(set, cfg, consumertest.NewNop())
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, p.Shutdown(context.Background()))
	assert.Len(t, logs.FilterMessageSnippet("rename it to state.journal").All(), 1)
}
