// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package writefailure // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/writefailure"

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/writebuffer"
)

const (
	// heldRetryMin and heldRetryMax pace the attempts to write what is held:
	// each failed write still moves the persistent queue's size accounting
	// (until the queue next empties), so they are not made in a tight loop.
	heldRetryMin = time.Second
	heldRetryMax = 30 * time.Second
	// heldPollInterval is how often the held data and the reserve are
	// looked at between requests, while there is something to look after.
	heldPollInterval = time.Second
	// While the queue merely holds data (nothing held, nothing failing),
	// the reserve is looked at before a writer filling the volume at
	// otherWriterBytesPerSecond could use up the free space above it, and
	// at least every watchMaxPolls poll intervals: a volume with room to
	// spare is not read every second while a batch waits.
	otherWriterBytesPerSecond = 64 << 20
	watchMaxPolls             = 10
)

// Outcomes of a failed queue write, as counted.
const (
	outcomeHeld    = "held"
	outcomeRefused = "refused"
	outcomeLost    = "lost"
)

// Settings are what a Stage needs of the exporter.
type Settings struct {
	// Storage is the persistent queue's storage extension.
	Storage component.ID
	// LimitBytes is write_failure_buffer_bytes.
	LimitBytes int64
	// ReserveDirectory and ReserveBytes are write_reserve_directory and
	// write_reserve_bytes; no reserve without both.
	ReserveDirectory string
	ReserveBytes     int64
	// QueueSizer and QueueCap are the queue's sizer and queue_size: a
	// byte cap larger than the volume is warned about.
	QueueSizer string
	QueueCap   int64
	Logger     *zap.Logger
	// Failures is the queue_write_failures counter.
	Failures metric.Int64Counter
	// Consume hands data to the sending queue.
	Consume func(context.Context, pmetric.Metrics) error
	// QueueSize is the sending queue's size; ok is false when it cannot be read.
	QueueSize func(context.Context) (size int64, ok bool)
	// Turn is the exporter's turn: Enqueue is called with it held, and the
	// Stage's writer takes it to write held data.
	Turn chan struct{}
}

// Stage holds what the persistent queue could not write. Enqueue is called
// with the turn held.
type Stage struct {
	set   Settings
	buf   *writebuffer.Buffer[heldMetrics]
	sizer pmetric.ProtoMarshaler
	// failing: a write failure was logged and the held data is not yet all
	// written; reason and where describe the last failure.
	failing bool
	reason  string
	where   string
	lastErr error
	stop    chan struct{}
	stopped chan struct{}
	// wake is signalled by Enqueue: the writer waits for it while there is
	// nothing to look after.
	wake chan struct{}
	// reserve keeps room on the queue's volume (reserve.go); nil: none.
	reserve *writeReserve
	// pollInterval is heldPollInterval (shorter in tests).
	pollInterval time.Duration
}

type heldMetrics struct {
	md     pmetric.Metrics
	points int
	bytes  int64
}

// errWriteRefused marks data refused because the queue could not write it
// and the memory bound was reached: it was not queued.
type errWriteRefused struct{ err error }

func (e errWriteRefused) Error() string { return e.err.Error() }
func (e errWriteRefused) Unwrap() error { return e.err }

// Refused tells whether err is data refused by Enqueue: the queue could
// not write it and the memory bound was reached, so it was not queued.
func Refused(err error) bool {
	_, ok := errors.AsType[errWriteRefused](err)
	return ok
}

// New returns the stage in front of a persistent queue; it warns when the
// queue's volume cannot hold the queue's byte cap.
func New(set Settings) *Stage {
	s := &Stage{
		set:          set,
		buf:          writebuffer.New[heldMetrics](set.LimitBytes, heldRetryMin, heldRetryMax),
		wake:         make(chan struct{}, 1),
		pollInterval: heldPollInterval,
	}
	if set.ReserveDirectory != "" && set.ReserveBytes > 0 {
		s.reserve = newWriteReserve(set.ReserveDirectory, set.ReserveBytes)
	}
	s.warnIfVolumeTooSmall()
	return s
}

// Bytes is the size of the data held.
func (s *Stage) Bytes() int64 { return s.buf.Bytes() }

// Len is the number of requests held.
func (s *Stage) Len() int { return s.buf.Len() }

// Start creates the reserve and starts the writer of held data.
func (s *Stage) Start() {
	if r := s.reserve; r != nil {
		if err := r.create(); err != nil {
			s.set.Logger.Warn("Could not create the write reserve; it is created once there is room",
				zap.String("file", r.path), zap.Int64("write_reserve_bytes", r.size), zap.Error(err))
		}
	}
	s.stop, s.stopped = make(chan struct{}), make(chan struct{})
	go s.writeHeldLoop()
}

// warnIfVolumeTooSmall says at start when the queue's volume is smaller
// than the queue's byte cap: a long outage would then fill the volume
// first, and what neither the volume nor write_failure_buffer_bytes holds is
// refused.
func (s *Stage) warnIfVolumeTooSmall() {
	dir := s.set.ReserveDirectory
	if dir == "" || s.set.QueueSizer != "bytes" {
		return
	}
	volume, err := volumeBytes(dir)
	if err != nil || !volumeTooSmall(volume, s.set.QueueCap, s.set.ReserveBytes) {
		return
	}
	s.set.Logger.Warn("The queue's volume is smaller than the queue's byte cap: a long CloudWatch outage fills the volume before the cap, and data past it is refused once write_failure_buffer_bytes is full; give the volume more room or lower sending_queue::queue_size (GPUBUILD_QUEUE_BYTES)",
		zap.String("directory", dir), zap.Int64("volume_bytes", volume),
		zap.Int64("queue_size_bytes", s.set.QueueCap), zap.Int64("write_reserve_bytes", s.set.ReserveBytes))
}

// writeFailureReason tells whether err is the storage failing to write (and
// so the data was not queued), and why.
func writeFailureReason(err error) (string, bool) {
	if err == nil || errors.Is(err, exporterhelper.ErrQueueIsFull) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return "", false
	}
	errno, ok := errors.AsType[syscall.Errno](err)
	if !ok {
		// bbolt formats some file errors (growing the file) with %s.
		for _, e := range []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT, syscall.EIO, syscall.EROFS} {
			if strings.Contains(err.Error(), e.Error()) {
				errno, ok = e, true
				break
			}
		}
		if !ok {
			return "", false
		}
	}
	switch errno {
	case syscall.ENOSPC, syscall.EDQUOT:
		return "no_space", true
	case syscall.EIO:
		return "io_error", true
	case syscall.EROFS:
		return "read_only", true
	default:
		return "other", true
	}
}

// Enqueue hands md to the sending queue, or holds it when the queue cannot
// write it or older held data is still waiting. Called with the turn held.
func (s *Stage) Enqueue(ctx context.Context, md pmetric.Metrics) error {
	// Data goes towards the queue: the writer looks after it again.
	defer s.wakeWriter()
	s.checkReserve()
	if s.buf.Len() > 0 || s.reserveOut() {
		s.writeHeld(ctx, false)
	}
	if s.buf.Len() > 0 || s.reserveOut() {
		// Behind what waits, so that data reaches the queue in order; and
		// while the reserve is out, only through writeHeld's check.
		return s.hold(ctx, md, s.reason, s.lastErr)
	}
	err := s.set.Consume(ctx, md)
	reason, ok := writeFailureReason(err)
	if !ok {
		return err
	}
	s.writeFailed(reason, err)
	return s.hold(ctx, md, reason, err)
}

func (s *Stage) wakeWriter() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Stage) hold(ctx context.Context, md pmetric.Metrics, reason string, cause error) error {
	points := md.DataPointCount()
	size := int64(s.sizer.MetricsSize(md))
	if s.buf.Push(heldMetrics{md: md, points: points, bytes: size}, size) {
		s.countWriteFailure(ctx, points, reason, outcomeHeld)
		return nil
	}
	s.countWriteFailure(ctx, points, reason, outcomeRefused)
	return errWriteRefused{fmt.Errorf("the sending queue cannot write to %s (%w) and %d bytes wait in memory (write_failure_buffer_bytes %d): retry later",
		s.where, cause, s.buf.Bytes(), s.buf.Limit())}
}

// writeHeld hands the held data to the queue, oldest first, until one
// write fails. Unless force, only when an attempt is due and, while the
// reserve is out, only when there is room.
func (s *Stage) writeHeld(ctx context.Context, force bool) {
	now := time.Now()
	if !force && !s.buf.Due(now) {
		return
	}
	for {
		head, ok := s.buf.Head()
		if !ok {
			break
		}
		if r := s.reserve; !force && r != nil && !r.inPlace && !r.roomFor(head.bytes) && !s.queueEmpty(ctx) {
			// Writing now would take the room kept for the queue's reads
			// and deletes: wait for room, or for the queue to empty (its
			// file then has room of its own). At shutdown (force) on disk
			// beats lost. Nothing was written, so no backoff: the next
			// look (each poll) writes as soon as the queue has emptied,
			// which it does once per batch while the volume stays full.
			return
		}
		err := s.set.Consume(ctx, head.md)
		if err != nil {
			if reason, ok := writeFailureReason(err); ok {
				s.reason, s.lastErr = reason, err
			}
			s.buf.Failed(now)
			return
		}
		s.buf.Pop()
	}
	s.episodeOver()
}

// episodeOver ends a failure episode once nothing is held and the reserve
// (if any) is back in place.
func (s *Stage) episodeOver() {
	if !s.failing || s.buf.Len() > 0 || (s.reserve != nil && !s.reserve.inPlace) {
		return
	}
	s.failing = false
	s.set.Logger.Info("The sending queue writes to its storage again; the data held in memory meanwhile is queued",
		zap.String("directory", s.where))
}

// writeFailed logs the start of a failure episode at error.
func (s *Stage) writeFailed(reason string, err error) {
	s.reason, s.lastErr = reason, err
	s.where = failedDirectory(err, s.set.Storage)
	if s.failing {
		return
	}
	s.failing = true
	if reason == "no_space" && s.reserve != nil && s.reserve.inPlace {
		if err := s.reserve.release(); err != nil {
			s.set.Logger.Warn("Could not delete the write reserve", zap.String("file", s.reserve.path), zap.Error(err))
		}
	}
	s.set.Logger.Error("The sending queue cannot write to its storage; data is held in memory and written when the storage takes it again, refused with a retryable error past write_failure_buffer_bytes",
		zap.String("directory", s.where), zap.String("reason", reason),
		zap.Int64("write_failure_buffer_bytes", s.buf.Limit()), zap.Error(err))
}

func (s *Stage) reserveOut() bool {
	return s.reserve != nil && !s.reserve.inPlace && s.failing
}

func (s *Stage) queueEmpty(ctx context.Context) bool {
	n, ok := s.set.QueueSize(ctx)
	return ok && n == 0
}

// checkReserve deletes the reserve when the volume runs low (the start of
// a failure episode, even if no write of ours failed yet: the queue's own
// reads and deletes need the room) and puts it back once nothing is held
// and there is room again.
func (s *Stage) checkReserve() {
	r := s.reserve
	if r == nil {
		return
	}
	released, err := r.releaseIfLow()
	if err != nil {
		s.set.Logger.Warn("Could not check or delete the write reserve", zap.String("file", r.path), zap.Error(err))
	}
	if released {
		s.writeFailed("no_space", &fs.PathError{Op: "statfs", Path: r.path, Err: errLowSpace})
	}
	if !r.inPlace && s.buf.Len() == 0 && r.create() == nil {
		s.set.Logger.Info("The write reserve is in place", zap.String("file", r.path), zap.Int64("write_reserve_bytes", r.size))
		s.episodeOver()
	}
}

// errLowSpace: the volume's free space fell under write_reserve_bytes.
var errLowSpace = errors.New("free space under write_reserve_bytes: the reserve was deleted to leave the queue room to read and delete")

// failedDirectory names the directory of the file whose write failed, or
// the storage extension when the error does not say.
func failedDirectory(err error, storage component.ID) string {
	if pe, ok := errors.AsType[*fs.PathError](err); ok && pe.Path != "" {
		return filepath.Dir(pe.Path)
	}
	return "the directory of " + storage.String()
}

func (s *Stage) countWriteFailure(ctx context.Context, points int, reason, outcome string) {
	s.set.Failures.Add(ctx, int64(points),
		metric.WithAttributes(attribute.String("reason", reason), attribute.String("outcome", outcome)))
}
