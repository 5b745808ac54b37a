// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package hostile

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
)

const queueSizeNotice = "GPUBUILD_QUEUE_SIZE is no longer read"

// A deployment upgraded with GPUBUILD_QUEUE_SIZE still set (the sidecar's
// queue was capped in requests by it, now in bytes by GPUBUILD_QUEUE_BYTES)
// is told so in one line, by validate and at start; the sidecar still
// starts. Without the variable there is no such line.
func TestRetiredQueueSizeVariableIsNamed(t *testing.T) {
	config := filepath.Join(binarytest.RepoRoot(), "otelcol-config.yaml")
	validate := func(extra ...string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, binarytest.Binary(t), "validate", "--config", config)
		cmd.Env = append(cleanEnv(t), extra...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "validate passes: %s", out)
		return string(out)
	}

	out := validate("GPUBUILD_QUEUE_SIZE=5000")
	require.Contains(t, out, queueSizeNotice)
	var line string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, queueSizeNotice) {
			line = l
		}
	}
	assert.Contains(t, line, "warn")
	assert.Contains(t, line, "set GPUBUILD_QUEUE_BYTES (bytes, default 268435456")
	assert.Contains(t, line, "now 268435456", "the cap in force")
	assert.NotContains(t, validate(), queueSizeNotice)

	s := startSidecar(t, t.TempDir(), "GPUBUILD_QUEUE_SIZE=5000", "GPUBUILD_QUEUE_BYTES=1048576")
	assert.Contains(t, s.Output.String(), queueSizeNotice)
	assert.Contains(t, s.Output.String(), "now 1048576")
	stopSoonAfterReady(t, s)
}
