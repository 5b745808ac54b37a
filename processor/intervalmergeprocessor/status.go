// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package intervalmergeprocessor

import (
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
)

// refusalStatus shows in the component status whether the processor
// refuses new requests (overLimit: the journal at state.journal.max_bytes,
// or the open interval at twice max_points): a recoverable error from the
// moment it refuses, OK once a hand-over made room. Only changes are
// reported, so a health check's recovery_duration counts from the first
// refusal, not from the latest.
type refusalStatus struct {
	host  component.Host // set by Start
	cause atomic.Pointer[error]

	mu       sync.Mutex // orders the reports
	reported bool       // the last report was a refusal
}

// set records whether the processor refuses (cause non-nil) and says
// whether that changed; report must follow, outside the processor's lock.
func (s *refusalStatus) set(cause error) bool {
	was := s.cause.Load() != nil
	if cause == nil {
		s.cause.Store(nil)
	} else if !was {
		s.cause.Store(&cause)
	}
	return was != (cause != nil)
}

// report sends the current state when it differs from the last one sent.
// Concurrent callers may interleave with set; each report reads the state
// afresh, so the last one sent is the current one.
func (s *refusalStatus) report() {
	s.mu.Lock()
	defer s.mu.Unlock()
	cause := s.cause.Load()
	if (cause != nil) == s.reported {
		return
	}
	s.reported = cause != nil
	if cause != nil {
		componentstatus.ReportStatus(s.host, componentstatus.NewRecoverableErrorEvent(*cause))
	} else {
		componentstatus.ReportStatus(s.host, componentstatus.NewEvent(componentstatus.StatusOK))
	}
}

// probeBytes is what a probe writes: about a request of a few hundred
// points, so that a disk that takes it takes the next requests.
const probeBytes = 64 << 10

// updateRefusal re-reads the refusal's cause after a hand-over (which is
// what makes room) and reports a change. Without requests coming in (a
// gateway taken out of its load balancer's rotation) this is what ends a
// refusal: after a failed journal write, a probe write tells whether the
// disk takes writes again.
func (p *mergeProcessor) updateRefusal() {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return
	}
	if p.writeFailure != nil && p.journal != nil && p.journal.Probe(probeBytes) == nil {
		p.writeFailure = nil
	}
	changed := p.status.set(p.refusalCause())
	p.mu.Unlock()
	if changed {
		p.status.report()
	}
}
