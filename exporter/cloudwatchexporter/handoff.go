// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter"

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/drain"
)

// defaultHandoffTimeout bounds the hand-off phase of Shutdown.
const defaultHandoffTimeout = 30 * time.Second

// HandoffConfig is the peer that takes what the drain at Shutdown left in
// the persistent queue: another gateway's OTLP receiver for hand-offs,
// whose pipeline goes straight into its own cloudwatch exporter. Empty
// endpoint: no hand-off (what is left stays on disk for the next start).
type HandoffConfig struct {
	// ClientConfig is the gRPC client to the peer (endpoint, TLS, auth,
	// headers); the connection is made only when a hand-off starts.
	configgrpc.ClientConfig `mapstructure:",squash"`
	// Timeout bounds the hand-off phase, which starts when
	// shutdown_drain_timeout ends with requests left; what is not
	// acknowledged by then stays in the queue.
	Timeout time.Duration `mapstructure:"timeout"`
}

func defaultHandoffConfig() HandoffConfig {
	return HandoffConfig{ClientConfig: configgrpc.NewDefaultClientConfig(), Timeout: defaultHandoffTimeout}
}

func (h *HandoffConfig) enabled() bool { return h.Endpoint != "" }

// Validate returns nil: Config.Validate checks the hand-off, naming its
// fields, and this keeps the collector from reporting ClientConfig's
// promoted Validate a second time under "handoff".
func (*HandoffConfig) Validate() error { return nil }

// problems lists what is wrong, naming the field.
func (h *HandoffConfig) problems() []error {
	if !h.enabled() {
		return nil
	}
	var errs []error
	if err := h.ClientConfig.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("handoff.endpoint: %q: %w", h.Endpoint, err))
	}
	if h.Timeout <= 0 {
		errs = append(errs, errors.New("handoff.timeout: must be positive"))
	}
	return errs
}

// handoff sends queued requests to the peer instead of CloudWatch once
// Shutdown turned it on. exporterhelper's queue removes a request only
// when the push returns nil, so a request leaves this gateway's queue only
// once the peer acknowledged it; the peer acknowledges once the request is
// written to its own persistent queue.
type handoff struct {
	cfg *HandoffConfig

	// on: pushes go to the peer.
	on atomic.Bool

	mu     sync.Mutex
	conn   *grpc.ClientConn
	client pmetricotlp.GRPCClient

	sent, refused, points atomic.Int64
}

// connect makes the connection to the peer; extensions and telemetry are
// the host's, for auth and middlewares.
func (h *handoff) connect(ctx context.Context, host component.Host, set component.TelemetrySettings) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	var ext map[component.ID]component.Component
	if host != nil {
		ext = host.GetExtensions()
	}
	conn, err := h.cfg.ToClientConn(ctx, ext, set)
	if err != nil {
		return err
	}
	h.conn, h.client = conn, pmetricotlp.NewGRPCClient(conn)
	return nil
}

// push sends md to the peer. Its errors are never permanent: what the
// peer refuses or cannot be reached for is retried, and at the end of the
// hand-off stays in the queue.
func (h *handoff) push(ctx context.Context, md pmetric.Metrics) error {
	h.mu.Lock()
	client := h.client
	h.mu.Unlock()
	if client == nil {
		h.refused.Add(1)
		return errors.New("hand-off: no connection to the peer")
	}
	resp, err := client.Export(ctx, pmetricotlp.NewExportRequestFromMetrics(md))
	if err == nil {
		if ps := resp.PartialSuccess(); ps.RejectedDataPoints() > 0 {
			err = fmt.Errorf("the peer rejected %d data points: %s", ps.RejectedDataPoints(), ps.ErrorMessage())
		}
	}
	if err != nil {
		h.refused.Add(1)
		return fmt.Errorf("hand-off to %s: %w", h.cfg.Endpoint, err)
	}
	h.sent.Add(1)
	h.points.Add(int64(md.DataPointCount()))
	return nil
}

func (h *handoff) close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.conn == nil {
		return nil
	}
	err := h.conn.Close()
	h.conn, h.client = nil, nil
	return err
}

// handOffLeftovers runs the hand-off phase of Shutdown when the drain left
// requests in the persistent queue: the pushes go to the peer until the
// queue is empty or handoff.timeout has passed. The request a retry holds
// goes at its next attempt (at most retry_on_failure.max_interval, with
// its randomization, away).
func (m *metricsExporter) handOffLeftovers(ctx context.Context) {
	h := m.handoff
	q := m.cfg.QueueConfig.Get()
	if h == nil || q == nil || q.StorageID == nil {
		return
	}
	left, ok := m.queue.size(ctx)
	if !ok || left == 0 {
		return
	}
	if err := h.connect(ctx, m.host, m.telemetrySettings); err != nil {
		m.logger.Warn("Cannot hand what the drain left to the peer; it stays in the persistent queue",
			zap.String("endpoint", h.cfg.Endpoint), zap.Int64("left", left), zap.Error(err))
		return
	}
	m.logger.Info("Handing what the drain left to the peer",
		zap.String("endpoint", h.cfg.Endpoint), zap.Int64("queued", left),
		zap.String("unit", q.Sizer.String()), zap.Duration("timeout", h.cfg.Timeout))
	begin := time.Now()
	h.on.Store(true)
	drain.Wait(ctx, drain.Settings{
		Timeout: h.cfg.Timeout, Size: m.queue.size, Unit: q.Sizer.String(),
		Persistent: true, Logger: zap.NewNop(),
	})
	rest, _ := m.queue.size(ctx)
	fields := []zap.Field{
		zap.String("endpoint", h.cfg.Endpoint), zap.Int64("handed_off_requests", h.sent.Load()),
		zap.Int64("handed_off_points", h.points.Load()), zap.Int64("refused_attempts", h.refused.Load()),
		zap.Int64("left", rest), zap.String("unit", q.Sizer.String()), zap.Duration("took", time.Since(begin)),
	}
	if rest > 0 {
		m.logger.Warn("The hand-off did not empty the queue before handoff.timeout; what is left stays in the persistent queue and is sent after the next start", fields...)
		return
	}
	m.logger.Info("Handed what the drain left to the peer", fields...)
}
