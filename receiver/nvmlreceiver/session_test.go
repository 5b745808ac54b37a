// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

//go:build cgo

package nvmlreceiver

import (
	"context"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/gpubuild/otelcol-gpubuild/internal/nvmlapi"
	"github.com/gpubuild/otelcol-gpubuild/receiver/nvmlreceiver/internal/metadata"
)

// lender is an extension that owns an NVML session, as nvml_sampler does.
type lender struct {
	component.StartFunc
	component.ShutdownFunc
	lib nvmlapi.Library
	gpm nvmlapi.GPMLock
}

func (l *lender) NVMLSession() (nvmlapi.Library, *nvmlapi.GPMLock, bool) {
	return l.lib, &l.gpm, l.lib != nil
}

type hostWith map[component.ID]component.Component

func (h hostWith) GetExtensions() map[component.ID]component.Component { return h }

// TestSharedNVMLSession: with nvml_session the receiver scrapes through
// the extension's session, waits (and retries) while the extension has not
// loaded NVML, and never shuts the session down; a missing or wrong
// extension fails the start naming the setting.
func TestSharedNVMLSession(t *testing.T) {
	ctx := context.Background()
	id := component.MustNewID("nvml_sampler")
	srv := newMockServer()
	shutdowns := 0
	srv.ShutdownFunc = func() nvml.Return { shutdowns++; return nvml.SUCCESS }
	cfg := defaultTestConfig()
	cfg.NVMLSession = &id
	set := receivertest.NewNopSettings(metadata.Type)
	clock := &testClock{t: time.Unix(1_700_000_000, 0)}
	ownLoads := 0
	own := func() (library, error) { ownLoads++; return srv, nil }

	ext := &lender{}
	s := newGPUScraperWith(cfg, set, own, nil, clock.now)
	require.NoError(t, s.start(ctx, hostWith{id: ext}))
	md, err := s.scrape(ctx)
	require.NoError(t, err)
	assert.Zero(t, md.DataPointCount(), "the extension has no NVML yet")

	ext.lib = srv
	clock.advance(cfg.InitRetryInterval)
	md, err = s.scrape(ctx)
	require.NoError(t, err)
	assert.Positive(t, md.DataPointCount())
	assert.Same(t, &ext.gpm, s.gpmLock, "GPM calls take the session owner's lock")
	require.NoError(t, s.shutdown(ctx))
	assert.Zero(t, shutdowns, "the session is the extension's")
	assert.Zero(t, ownLoads, "the receiver loads no NVML of its own")

	for name, host := range map[string]hostWith{
		"missing": {},
		"wrong":   {id: &lender2{}},
	} {
		s := newGPUScraperWith(cfg, set, own, nil, clock.now)
		err := s.start(ctx, host)
		assert.ErrorContains(t, err, "nvml_session: ", name)
		assert.ErrorContains(t, err, `"nvml_sampler"`, name)
	}
}

// lender2 is an extension without an NVML session.
type lender2 struct {
	component.StartFunc
	component.ShutdownFunc
}
