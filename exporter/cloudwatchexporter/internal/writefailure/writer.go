// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package writefailure // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/writefailure"

import (
	"context"
	"time"

	"go.uber.org/zap"
)

// writeHeldLoop writes held data when no request comes to do it, and looks
// at the reserve while the queue holds data (its reads and deletes need
// the room). With nothing held, the reserve in place and the queue empty,
// nothing writes to the volume until the next Enqueue, which looks at the
// reserve before it writes: the loop then waits for it instead of reading
// the volume's free space every second.
func (s *Stage) writeHeldLoop() {
	defer close(s.stopped)
	tick := time.NewTicker(s.pollInterval)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
		select {
		case <-s.stop:
			return
		case s.set.Turn <- struct{}{}:
		}
		idle := s.idle(context.Background())
		next := s.pollInterval
		if !idle {
			s.checkReserve()
			if s.buf.Len() > 0 {
				s.writeHeld(context.Background(), false)
			}
			next = s.watchInterval()
		}
		<-s.set.Turn
		if idle {
			select {
			case <-s.stop:
				return
			case <-s.wake:
			}
		}
		tick.Reset(next)
	}
}

// watchInterval is how long the writer may wait before it looks again:
// the poll interval while data is held or a failure episode lasts; while
// the queue only holds data, the time a writer filling the volume at
// otherWriterBytesPerSecond would take to reach the reserve, within one
// and watchMaxPolls poll intervals. Called with the turn held, after
// checkReserve.
func (s *Stage) watchInterval() time.Duration {
	r := s.reserve
	if r == nil || !r.inPlace || s.failing || s.buf.Len() > 0 {
		return s.pollInterval
	}
	headroom := r.lastFree - r.size
	reach := time.Duration(float64(headroom) / otherWriterBytesPerSecond * float64(time.Second))
	return min(max(reach, s.pollInterval), watchMaxPolls*s.pollInterval)
}

// idle tells whether there is nothing to look after: nothing held, no
// failure episode and, with a reserve, the reserve in place and the queue
// empty. Called with the turn held.
func (s *Stage) idle(ctx context.Context) bool {
	if s.buf.Len() > 0 || s.failing {
		return false
	}
	r := s.reserve
	return r == nil || (r.inPlace && s.queueEmpty(ctx))
}

// Stop stops the writer and makes a last attempt to queue what is held;
// what is still held is lost, counted and logged at error.
func (s *Stage) Stop(ctx context.Context) {
	if s.stop == nil {
		return
	}
	close(s.stop)
	<-s.stopped
	s.set.Turn <- struct{}{}
	defer func() { <-s.set.Turn }()
	if s.buf.Len() == 0 {
		return
	}
	s.writeHeld(ctx, true)
	lost := 0
	for {
		head, ok := s.buf.Head()
		if !ok {
			break
		}
		lost += head.points
		s.buf.Pop()
	}
	if lost > 0 {
		s.countWriteFailure(ctx, lost, s.reason, outcomeLost)
		s.set.Logger.Error("Data held in memory because the sending queue could not write it is lost at shutdown",
			zap.String("directory", s.where), zap.Int("data_points", lost), zap.Error(s.lastErr))
	}
}
