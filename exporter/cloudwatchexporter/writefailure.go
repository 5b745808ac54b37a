// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter"

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

// Why this file exists: exporterhelper's persistent queue hands a failed
// storage write (a full or failing disk) back to the caller as a plain
// error. Passed upstream as is, the data would be refused although it was
// accepted by the exporter's delta conversion, and a full disk would look
// like any other error. Here such data is held in memory, in order ahead
// of what comes next, up to write_failure_buffer_bytes, and written as soon
// as the queue takes it again; past the bound it is refused with a
// retryable error (OTLP clients retry) and its conversion undone.

const (
	// heldRetryMin and heldRetryMax pace the attempts to write what is held:
	// each failed write still moves the persistent queue's size accounting
	// (until the queue next empties), so they are not made in a tight loop.
	heldRetryMin = time.Second
	heldRetryMax = 30 * time.Second
	// heldPollInterval is how often the held data is looked at between requests.
	heldPollInterval = time.Second
)

// Outcomes of a failed queue write, as counted.
const (
	outcomeHeld    = "held"
	outcomeRefused = "refused"
	outcomeLost    = "lost"
)

type writeBuffer struct {
	buf     *writebuffer.Buffer[heldMetrics]
	storage component.ID
	sizer   pmetric.ProtoMarshaler
	// failing: a write failure was logged and the held data is not yet all
	// written; reason and where describe the last failure.
	failing bool
	reason  string
	where   string
	lastErr error
	stop    chan struct{}
	stopped chan struct{}
	// reserve keeps room on the queue's volume (writereserve.go); nil: none.
	reserve *writeReserve
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

func refusedForWriteFailure(err error) bool {
	_, ok := errors.AsType[errWriteRefused](err)
	return ok
}

func (m *metricsExporter) setUpWriteBuffer() error {
	q := m.exp.cfg.QueueConfig.Get()
	if q == nil || q.StorageID == nil {
		return nil
	}
	m.held = &writeBuffer{
		buf:     writebuffer.New[heldMetrics](m.exp.cfg.WriteFailureBufferBytes, heldRetryMin, heldRetryMax),
		storage: *q.StorageID,
	}
	if cfg := m.exp.cfg; cfg.WriteReserveDirectory != "" && cfg.WriteReserveBytes > 0 {
		m.held.reserve = newWriteReserve(cfg.WriteReserveDirectory, cfg.WriteReserveBytes)
	}
	m.warnIfVolumeTooSmall()
	held := m.held.buf
	return m.exp.telemetry.RegisterExporterCloudwatchQueueWriteBufferBytesCallback(func(_ context.Context, o metric.Int64Observer) error {
		o.Observe(held.Bytes())
		return nil
	})
}

// warnIfVolumeTooSmall says at start when the queue's volume is smaller
// than the queue's byte cap: a long outage would then fill the volume
// first, and what neither the volume nor write_failure_buffer_bytes holds is
// refused.
func (m *metricsExporter) warnIfVolumeTooSmall() {
	q := m.exp.cfg.QueueConfig.Get()
	dir := m.exp.cfg.WriteReserveDirectory
	if dir == "" || q.Sizer.String() != "bytes" {
		return
	}
	volume, err := volumeBytes(dir)
	if err != nil || !volumeTooSmall(volume, q.QueueSize, m.exp.cfg.WriteReserveBytes) {
		return
	}
	m.exp.logger.Warn("The queue's volume is smaller than the queue's byte cap: a long CloudWatch outage fills the volume before the cap, and data past it is refused once write_failure_buffer_bytes is full; give the volume more room or lower sending_queue::queue_size (GPUBUILD_QUEUE_BYTES)",
		zap.String("directory", dir), zap.Int64("volume_bytes", volume),
		zap.Int64("queue_size_bytes", q.QueueSize), zap.Int64("write_reserve_bytes", m.exp.cfg.WriteReserveBytes))
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

// enqueue hands md to the sending queue, or holds it when the queue cannot
// write it or older held data is still waiting. Called with the turn held.
func (m *metricsExporter) enqueue(ctx context.Context, md pmetric.Metrics) error {
	if m.held == nil {
		return m.Metrics.ConsumeMetrics(ctx, md)
	}
	m.checkReserve()
	if m.held.buf.Len() > 0 || m.reserveOut() {
		m.writeHeld(ctx, false)
	}
	if m.held.buf.Len() > 0 || m.reserveOut() {
		// Behind what waits, so that data reaches the queue in order; and
		// while the reserve is out, only through writeHeld's check.
		return m.hold(ctx, md, m.held.reason, m.held.lastErr)
	}
	err := m.Metrics.ConsumeMetrics(ctx, md)
	reason, ok := writeFailureReason(err)
	if !ok {
		return err
	}
	m.writeFailed(reason, err)
	return m.hold(ctx, md, reason, err)
}

func (m *metricsExporter) hold(ctx context.Context, md pmetric.Metrics, reason string, cause error) error {
	h := m.held
	points := md.DataPointCount()
	size := int64(h.sizer.MetricsSize(md))
	if h.buf.Push(heldMetrics{md: md, points: points, bytes: size}, size) {
		m.countWriteFailure(ctx, points, reason, outcomeHeld)
		return nil
	}
	m.countWriteFailure(ctx, points, reason, outcomeRefused)
	return errWriteRefused{fmt.Errorf("the sending queue cannot write to %s (%w) and %d bytes wait in memory (write_failure_buffer_bytes %d): retry later",
		h.where, cause, h.buf.Bytes(), h.buf.Limit())}
}

// writeHeld hands the held data to the queue, oldest first, until one
// write fails. Unless force, only when an attempt is due and, while the
// reserve is out, only when there is room.
func (m *metricsExporter) writeHeld(ctx context.Context, force bool) {
	h := m.held
	now := time.Now()
	if !force && !h.buf.Due(now) {
		return
	}
	for {
		head, ok := h.buf.Head()
		if !ok {
			break
		}
		if r := h.reserve; !force && r != nil && !r.inPlace && !r.roomFor(head.bytes) && !m.queueEmpty(ctx) {
			// Writing now would take the room kept for the queue's reads
			// and deletes: wait for room, or for the queue to empty (its
			// file then has room of its own). At shutdown (force) on disk
			// beats lost.
			h.buf.Failed(now)
			return
		}
		err := m.Metrics.ConsumeMetrics(ctx, head.md)
		if err != nil {
			if reason, ok := writeFailureReason(err); ok {
				h.reason, h.lastErr = reason, err
			}
			h.buf.Failed(now)
			return
		}
		h.buf.Pop()
	}
	m.episodeOver()
}

// episodeOver ends a failure episode once nothing is held and the reserve
// (if any) is back in place.
func (m *metricsExporter) episodeOver() {
	h := m.held
	if !h.failing || h.buf.Len() > 0 || (h.reserve != nil && !h.reserve.inPlace) {
		return
	}
	h.failing = false
	m.exp.logger.Info("The sending queue writes to its storage again; the data held in memory meanwhile is queued",
		zap.String("directory", h.where))
}

// writeFailed logs the start of a failure episode at error.
func (m *metricsExporter) writeFailed(reason string, err error) {
	h := m.held
	h.reason, h.lastErr = reason, err
	h.where = failedDirectory(err, h.storage)
	if h.failing {
		return
	}
	h.failing = true
	if reason == "no_space" && h.reserve != nil && h.reserve.inPlace {
		if err := h.reserve.release(); err != nil {
			m.exp.logger.Warn("Could not delete the write reserve", zap.String("file", h.reserve.path), zap.Error(err))
		}
	}
	m.exp.logger.Error("The sending queue cannot write to its storage; data is held in memory and written when the storage takes it again, refused with a retryable error past write_failure_buffer_bytes",
		zap.String("directory", h.where), zap.String("reason", reason),
		zap.Int64("write_failure_buffer_bytes", h.buf.Limit()), zap.Error(err))
}

func (m *metricsExporter) reserveOut() bool {
	return m.held.reserve != nil && !m.held.reserve.inPlace && m.held.failing
}

func (m *metricsExporter) queueEmpty(ctx context.Context) bool {
	n, ok := m.queue.size(ctx)
	return ok && n == 0
}

// checkReserve deletes the reserve when the volume runs low (the start of
// a failure episode, even if no write of ours failed yet: the queue's own
// reads and deletes need the room) and puts it back once nothing is held
// and there is room again.
func (m *metricsExporter) checkReserve() {
	r := m.held.reserve
	if r == nil {
		return
	}
	released, err := r.releaseIfLow()
	if err != nil {
		m.exp.logger.Warn("Could not check or delete the write reserve", zap.String("file", r.path), zap.Error(err))
	}
	if released {
		m.writeFailed("no_space", &fs.PathError{Op: "statfs", Path: r.path, Err: errLowSpace})
	}
	if !r.inPlace && m.held.buf.Len() == 0 && r.create() == nil {
		m.exp.logger.Info("The write reserve is in place", zap.String("file", r.path), zap.Int64("write_reserve_bytes", r.size))
		m.episodeOver()
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

func (m *metricsExporter) countWriteFailure(ctx context.Context, points int, reason, outcome string) {
	m.exp.telemetry.ExporterCloudwatchQueueWriteFailures.Add(ctx, int64(points),
		metric.WithAttributes(attribute.String("reason", reason), attribute.String("outcome", outcome)))
}

// writeHeldLoop writes held data when no request comes to do it.
func (m *metricsExporter) writeHeldLoop() {
	defer close(m.held.stopped)
	tick := time.NewTicker(heldPollInterval)
	defer tick.Stop()
	for {
		select {
		case <-m.held.stop:
			return
		case <-tick.C:
		}
		if m.held.buf.Len() == 0 && m.held.reserve == nil {
			continue
		}
		select {
		case <-m.held.stop:
			return
		case m.turn <- struct{}{}:
		}
		m.checkReserve()
		if m.held.buf.Len() > 0 {
			m.writeHeld(context.Background(), false)
		}
		<-m.turn
	}
}

// stopWriteBuffer stops the writer and makes a last attempt to queue what
// is held; what is still held is lost, counted and logged at error.
func (m *metricsExporter) stopWriteBuffer(ctx context.Context) {
	if m.held == nil || m.held.stop == nil {
		return
	}
	close(m.held.stop)
	<-m.held.stopped
	m.turn <- struct{}{}
	defer func() { <-m.turn }()
	if m.held.buf.Len() == 0 {
		return
	}
	m.writeHeld(ctx, true)
	lost := 0
	for {
		head, ok := m.held.buf.Head()
		if !ok {
			break
		}
		lost += head.points
		m.held.buf.Pop()
	}
	if lost > 0 {
		m.countWriteFailure(ctx, lost, m.held.reason, outcomeLost)
		m.exp.logger.Error("Data held in memory because the sending queue could not write it is lost at shutdown",
			zap.String("directory", m.held.where), zap.Int("data_points", lost), zap.Error(m.held.lastErr))
	}
}
