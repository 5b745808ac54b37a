// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter"

import (
	"fmt"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"

	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/send"
)

// sendStatus shows in the component status whether PutMetricData gets
// through: a recoverable error once an export's calls all failed for a
// reason that is not the request's (a server error, no answer, refused
// credentials), OK again at the first call CloudWatch took. Throttling and
// rejected requests change nothing (CloudWatch answers). Only changes are
// reported, so a health check's recovery_duration counts from the first
// failure, not from the latest retry.
type sendStatus struct {
	mu      sync.Mutex
	failing bool
}

// update reports what one export's outcomes say, when it changes the state.
func (s *sendStatus) update(host component.Host, outcomes *[send.NumOutcomes]int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	failing := s.failing
	switch {
	case outcomes[send.OutcomeSuccess] > 0:
		failing = false
	case outcomes[send.OutcomeServerError]+outcomes[send.OutcomeNetworkError]+outcomes[send.OutcomeAuthError] > 0:
		failing = true
	}
	if failing == s.failing {
		return
	}
	s.failing = failing
	if !failing {
		componentstatus.ReportStatus(host, componentstatus.NewEvent(componentstatus.StatusOK))
		return
	}
	componentstatus.ReportStatus(host, componentstatus.NewRecoverableErrorEvent(fmt.Errorf(
		"PutMetricData is failing: %d server errors, %d calls without an answer, %d with the credentials refused; the data is retried",
		outcomes[send.OutcomeServerError], outcomes[send.OutcomeNetworkError], outcomes[send.OutcomeAuthError])))
}
