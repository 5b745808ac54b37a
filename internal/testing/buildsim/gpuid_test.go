// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package buildsim

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
)

func TestRunGPUIDsAndProcessPID(t *testing.T) {
	gpus := []string{"GPU-a", "GPU-b"}
	cfg := testConfig()
	cfg.Jobs = 10
	cfg.GPUIDs = gpus
	cfg.ProcessPID = 4242
	rec := &recorder{}
	_, err := Run(context.Background(), cfg, WithExporterFactory(rec.factory))
	require.NoError(t, err)

	// Every job and stage span names the GPU of its run (run n: gpus[n%2],
	// so both appear) and its resource the process.
	seen := map[string]bool{}
	for _, s := range rec.spans {
		attrs := attribute.NewSet(s.Attributes()...)
		if _, isJob := attrs.Value(AttrJobID); !isJob {
			continue
		}
		id, ok := attrs.Value(AttrGPUID)
		require.True(t, ok, "span %s names no GPU", s.Name())
		seen[id.AsString()] = true
		pid, ok := s.Resource().Set().Value(AttrProcessPID)
		require.True(t, ok)
		require.Equal(t, int64(4242), pid.AsInt64())
	}
	require.Equal(t, map[string]bool{"GPU-a": true, "GPU-b": true}, seen)
	require.NotEmpty(t, rec.logs)
	for _, r := range rec.logs {
		var id string
		r.WalkAttributes(func(kv attribute.KeyValue) bool {
			if string(kv.Key) == AttrGPUID {
				id = kv.Value.AsString()
			}
			return true
		})
		require.Contains(t, gpus, id)
	}
}

func TestRunNamesNoGPUByDefault(t *testing.T) {
	cfg := testConfig()
	cfg.Jobs = 5
	rec := &recorder{}
	_, err := Run(context.Background(), cfg, WithExporterFactory(rec.factory))
	require.NoError(t, err)
	require.NotEmpty(t, rec.spans)
	for _, s := range rec.spans {
		attrs := attribute.NewSet(s.Attributes()...)
		_, ok := attrs.Value(AttrGPUID)
		require.False(t, ok, "span %s", s.Name())
		_, ok = s.Resource().Set().Value(AttrProcessPID)
		require.False(t, ok)
	}
	for _, r := range rec.logs {
		r.WalkAttributes(func(kv attribute.KeyValue) bool {
			require.NotEqual(t, AttrGPUID, string(kv.Key))
			return true
		})
	}
}
