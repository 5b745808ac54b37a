// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package intervalmergeprocessor

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"

	"github.com/gpubuild/otelcol-gpubuild/processor/intervalmergeprocessor/internal/metadatatest"
)

// statusHost records the component status the processor reports.
type statusHost struct {
	component.Host
	mu     sync.Mutex
	events []*componentstatus.Event
}

func (h *statusHost) Report(ev *componentstatus.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, ev)
}

func (h *statusHost) statuses() []componentstatus.Status {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []componentstatus.Status
	for _, ev := range h.events {
		out = append(out, ev.Status())
	}
	return out
}

func startWithHost(t *testing.T, next consumer.Metrics, host component.Host, maxBytes int64) *mergeProcessor {
	t.Helper()
	cfg := createDefaultConfig()
	cfg.Interval = time.Hour // flushed by the test
	cfg.State.Journal.Directory = t.TempDir()
	cfg.State.Journal.MaxBytes = maxBytes
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	p, err := newMergeProcessor(metadatatest.NewSettings(tel), cfg, next)
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), host))
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	return p
}

// TestJournalFullIsARecoverableStatusUntilThereIsRoom: a processor that
// refuses requests at its journal bound reports a recoverable error once
// (however many requests it refuses, so a health check's
// recovery_duration counts from the first refusal), and OK once a
// hand-over made room, without a request coming in.
func TestJournalFullIsARecoverableStatusUntilThereIsRoom(t *testing.T) {
	next := &flaky{}
	next.refuse.Store(true)
	host := &statusHost{Host: componenttest.NewNopHost()}
	p := startWithHost(t, next, host, 4<<10)
	ctx := context.Background()
	refusals := 0
	for i := 0; i < 1000 && refusals < 5; i++ {
		if err := p.ConsumeMetrics(ctx, stamped("a", uint64(i+1), 1)); err != nil {
			refusals++
		}
		if i%10 == 9 {
			p.flush(ctx, true)
		}
	}
	require.Equal(t, 5, refusals)
	require.Equal(t, []componentstatus.Status{componentstatus.StatusRecoverableError}, host.statuses())
	host.mu.Lock()
	assert.ErrorContains(t, host.events[0].Err(), "state.journal.max_bytes")
	host.mu.Unlock()

	next.refuse.Store(false)
	p.flush(ctx, false)
	assert.Equal(t, []componentstatus.Status{componentstatus.StatusRecoverableError, componentstatus.StatusOK}, host.statuses())
	require.NoError(t, p.ConsumeMetrics(ctx, stamped("a", 5000, 1)))
	assert.Len(t, host.statuses(), 2, "no report while nothing changes")
}

// TestFullJournalReadBackIsReportedWithoutARequest: a processor started on
// a journal at its bound (the previous process's backlog) reports the
// refusal at its first hand-over attempt, before any sender tries it.
func TestFullJournalReadBackIsReportedWithoutARequest(t *testing.T) {
	dir := t.TempDir()
	next := &flaky{}
	next.refuse.Store(true)
	first := startGateway(t, dir, next)
	for i := range 20 {
		require.NoError(t, first.ConsumeMetrics(context.Background(), stamped("a", uint64(i+1), 1)))
	}
	first.kill()
	bytes := first.journalBytes()
	require.Positive(t, bytes)

	host := &statusHost{Host: componenttest.NewNopHost()}
	cfg := createDefaultConfig()
	cfg.Interval = time.Hour
	cfg.State.Journal.Directory = dir
	cfg.State.Journal.MaxBytes = bytes
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	p, err := newMergeProcessor(metadatatest.NewSettings(tel), cfg, next)
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), host))
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	p.flush(context.Background(), false)
	assert.Equal(t, []componentstatus.Status{componentstatus.StatusRecoverableError}, host.statuses())
}
