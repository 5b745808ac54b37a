// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package runtimetuning

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}
}

func TestSettingsFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name string
		vars map[string]string
		want Settings
	}{
		{"defaults", nil, Settings{OneP: true, ReleaseIdleMemory: true}},
		{"GOMAXPROCS set", map[string]string{"GOMAXPROCS": "4"}, Settings{OneP: false, ReleaseIdleMemory: true}},
		{"GOMAXPROCS empty", map[string]string{"GOMAXPROCS": ""}, Settings{OneP: true, ReleaseIdleMemory: true}},
		{"release off", map[string]string{"GPUBUILD_RELEASE_IDLE_MEMORY": "false"}, Settings{OneP: true, ReleaseIdleMemory: false}},
		{"release on", map[string]string{"GPUBUILD_RELEASE_IDLE_MEMORY": "true"}, Settings{OneP: true, ReleaseIdleMemory: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FromEnv(env(tc.vars))
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestSettingsFromEnvNamesABadVariable(t *testing.T) {
	_, err := FromEnv(env(map[string]string{"GPUBUILD_RELEASE_IDLE_MEMORY": "maybe"}))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "GPUBUILD_RELEASE_IDLE_MEMORY")
}

func TestApplySetsOnePOnlyWhenAsked(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(before) })

	runtime.GOMAXPROCS(3)
	Settings{OneP: false}.Apply()
	assert.Equal(t, 3, runtime.GOMAXPROCS(0), "GOMAXPROCS from the environment is the runtime's to apply")

	Settings{OneP: true}.Apply()
	assert.Equal(t, 1, runtime.GOMAXPROCS(0))
}
