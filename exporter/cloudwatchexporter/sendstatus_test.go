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
	export := func(o requestOutcome, n int64) {
		var outcomes [numOutcomes]int64
		outcomes[o] = n
		s.update(host, &outcomes)
	}
	export(outcomeSuccess, 1)
	export(outcomeThrottled, 2)
	export(outcomeRejected, 1)
	assert.Empty(t, host.got)
	export(outcomeNetworkError, 3)
	export(outcomeServerError, 1)
	export(outcomeAuthError, 1)
	export(outcomeThrottled, 1)
	assert.Equal(t, []componentstatus.Status{componentstatus.StatusRecoverableError}, host.got)
	export(outcomeSuccess, 1)
	export(outcomeSuccess, 1)
	assert.Equal(t, []componentstatus.Status{componentstatus.StatusRecoverableError, componentstatus.StatusOK}, host.got)

	var mixed [numOutcomes]int64
	mixed[outcomeSuccess], mixed[outcomeNetworkError] = 1, 4
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
	var outcomes [numOutcomes]int64
	outcomes[outcomeNetworkError] = 1
	s.update(wrapped, &outcomes)
	assert.Equal(t, []componentstatus.Status{componentstatus.StatusRecoverableError}, host.got)
}
