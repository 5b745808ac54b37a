// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package intervalmergeprocessor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
