// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !cgo

package nvmlreceiver

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gpubuild/otelcol-gpubuild/receiver/nvmlreceiver/internal/metadata"
)

func TestWithoutCgoSaysGPUSupportIsMissing(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	set := receivertest.NewNopSettings(metadata.Type)
	set.Logger = zap.New(core)
	s := newGPUScraper(createDefaultConfig(), set)
	require.NoError(t, s.start(context.Background(), componenttest.NewNopHost()))
	md, err := s.scrape(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 0, md.DataPointCount())
	require.NoError(t, s.shutdown(context.Background()))
	require.Equal(t, 1, logs.Len())
	assert.Equal(t, zapcore.WarnLevel, logs.All()[0].Level)
	assert.Contains(t, logs.All()[0].Message, "GPU support is not compiled in")
}
