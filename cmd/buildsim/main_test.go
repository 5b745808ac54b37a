// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/buildsim"
)

func TestParseFlags(t *testing.T) {
	t.Setenv("BUILDSIM_BEARER_TOKEN", "from-env")
	var stderr bytes.Buffer
	cfg, out, err := parseFlags([]string{
		"-protocol", "http", "-endpoint", "127.0.0.1:4318", "-jobs", "7", "-rate", "0",
		"-stages", "download=1s,gpu_build=2m", "-signals", "job_logs,metrics",
		"-headers", "x-tenant=a,x-env=test", "-restart-after", "3", "-summary", "/tmp/s.json",
	}, &stderr)
	require.NoError(t, err)
	assert.Equal(t, "/tmp/s.json", out)
	assert.Equal(t, buildsim.ProtocolHTTP, cfg.Protocol)
	assert.Equal(t, 7, cfg.Jobs)
	assert.Equal(t, []buildsim.StageMean{{Stage: "download", Mean: time.Second}, {Stage: "gpu_build", Mean: 2 * time.Minute}}, cfg.StageMeans)
	assert.Equal(t, map[string]string{"x-tenant": "a", "x-env": "test"}, cfg.Headers)
	assert.Equal(t, "from-env", cfg.BearerToken, "token from the environment, not argv")
	assert.True(t, cfg.JobLogs && cfg.Metrics)
	assert.False(t, cfg.JobSpans || cfg.StageSpans || cfg.APISpans)
	assert.Equal(t, 3, cfg.RestartAfter)
}

func TestParseFlagsRejects(t *testing.T) {
	for _, args := range [][]string{
		{"-protocol", "udp"},
		{"-stages", "download"},
		{"-signals", "traces"},
		{"-headers", "novalue"},
		{"-failure-ratio", "2"},
		{"extra"},
	} {
		_, _, err := parseFlags(args, &bytes.Buffer{})
		assert.Error(t, err, args)
	}
}

func TestHelpDoesNotPrintTheToken(t *testing.T) {
	t.Setenv("BUILDSIM_BEARER_TOKEN", "s3cr3t-token")
	var stderr bytes.Buffer
	_, _, err := parseFlags([]string{"-h"}, &stderr)
	require.Error(t, err)
	assert.NotContains(t, stderr.String(), "s3cr3t-token")
}
