// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/component/componenttest"

	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/queuecompress"

	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/send"
)

type statusRecorder struct {
	component.Host
	got []componentstatus.Status
}

func (r *statusRecorder) Report(ev *componentstatus.Event) { r.got = append(r.got, ev.Status()) }

// TestSendStatusReportsChangesOnly: calls that fail without CloudWatch
// taking any are a recoverable error, reported once however often the
// retries fail; the first call taken is OK; throttling and rejected
// requests change nothing.
func TestSendStatusReportsChangesOnly(t *testing.T) {
	host := &statusRecorder{Host: componenttest.NewNopHost()}
	var s sendStatus
	export := func(o send.RequestOutcome, n int64) {
		var outcomes [send.NumOutcomes]int64
		outcomes[o] = n
		s.update(host, &outcomes)
	}
	export(send.OutcomeSuccess, 1)
	export(send.OutcomeThrottled, 2)
	export(send.OutcomeRejected, 1)
	assert.Empty(t, host.got)
	export(send.OutcomeNetworkError, 3)
	export(send.OutcomeServerError, 1)
	export(send.OutcomeAuthError, 1)
	export(send.OutcomeThrottled, 1)
	assert.Equal(t, []componentstatus.Status{componentstatus.StatusRecoverableError}, host.got)
	export(send.OutcomeSuccess, 1)
	export(send.OutcomeSuccess, 1)
	assert.Equal(t, []componentstatus.Status{componentstatus.StatusRecoverableError, componentstatus.StatusOK}, host.got)

	var mixed [send.NumOutcomes]int64
	mixed[send.OutcomeSuccess], mixed[send.OutcomeNetworkError] = 1, 4
	s.update(host, &mixed)
	assert.Len(t, host.got, 2, "an export with a call taken is not failing")
}

// TestStatusPassesThroughTheQueueHost: with a persistent queue the exporter
// starts on a host wrapped by queuecompress; its status still reaches the
// service's host.
func TestStatusPassesThroughTheQueueHost(t *testing.T) {
	host := &statusRecorder{Host: componenttest.NewNopHost()}
	wrapped := queuecompress.NewHost(host, component.MustNewID("file_storage"), component.MustNewID("cloudwatch"), queueClientName, isQueueItemKey)
	var s sendStatus
	var outcomes [send.NumOutcomes]int64
	outcomes[send.OutcomeNetworkError] = 1
	s.update(wrapped, &outcomes)
	assert.Equal(t, []componentstatus.Status{componentstatus.StatusRecoverableError}, host.got)
}
