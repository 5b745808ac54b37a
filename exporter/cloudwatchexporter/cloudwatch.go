// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter"

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/adaptiverate"
	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/metadata"
	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/translate"
)

const (
	// throttleRetryDelay is the least time before a throttled request is retried.
	throttleRetryDelay = time.Second
)

// errAutoDryRun is the component status of an auto dry run: nothing reaches CloudWatch.
var errAutoDryRun = errors.New("dry run: no AWS region or credentials found, printing PutMetricData requests to stdout instead of sending them")

// cloudWatchExporter translates, packs and sends metrics; exporterhelper
// calls pushMetrics from the sending queue and retries what it hands back.
type cloudWatchExporter struct {
	id         component.ID
	cfg        *Config
	logger     *zap.Logger
	telemetry  *metadata.TelemetryBuilder
	translator *translate.Translator
	deltas     *deltaConverter
	series     *translate.SeriesLimiter // nil: max_series_per_metric 0
	slots      chan struct{}            // bounds the requests in flight, across concurrent exports
	pace       *adaptiverate.Limiter
	now        func() time.Time
	// throttleDelay is the least wait before a throttled request is retried.
	throttleDelay time.Duration

	// saveFailing: the last save of the cumulative state failed.
	saveFailing atomic.Bool

	// set by start
	putter   putter
	dryRun   atomic.Bool
	file     *os.File
	resolver *credentialsResolver // output_destination auto only
	answered *answeredRequests    // nil: no persistent queue, or a dry run
	host     component.Host
	// autoDryRunReported: the auto dry run was reported as component status.
	autoDryRunReported atomic.Bool

	translations sync.Pool
}

// translationBuffers is the per-export scratch space, reused through a pool.
type translationBuffers struct {
	translate.Translation
	reqs []translate.PackedRequest
}

func newCloudWatchExporter(cfg *Config, set exporter.Settings) (*cloudWatchExporter, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	e := &cloudWatchExporter{
		id:         set.ID,
		cfg:        cfg,
		logger:     set.Logger,
		telemetry:  tb,
		translator: translate.NewTranslator(translatorConfig(cfg)),
		deltas:     newLoggedDeltaConverter(cfg.CumulativeState, set.Logger),
		series:     translate.NewSeriesLimiter(cfg.MaxSeriesPerMetric, set.Logger),
		slots:      make(chan struct{}, cfg.MaxConcurrentRequests),
		now:        time.Now,

		throttleDelay: throttleRetryDelay,
	}
	e.pace = adaptiverate.New(cfg.MaxRequestsPerSecond, time.Now)
	e.translations.New = func() any { return new(translationBuffers) }
	err = tb.RegisterExporterCloudwatchCumulativeSeriesCallback(func(_ context.Context, o metric.Int64Observer) error {
		o.Observe(int64(e.deltas.seriesCount()))
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = tb.RegisterExporterCloudwatchRequestRateLimitCallback(func(_ context.Context, o metric.Float64Observer) error {
		o.Observe(e.pace.Limit())
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = tb.RegisterExporterCloudwatchDryRunCallback(func(_ context.Context, o metric.Int64Observer) error {
		if e.dryRun.Load() {
			o.Observe(1)
		} else {
			o.Observe(0)
		}
		return nil
	})
	return e, err
}

func (e *cloudWatchExporter) start(ctx context.Context, host component.Host) error {
	e.host = host
	if err := e.openState(ctx, host); err != nil {
		return err
	}
	switch e.cfg.OutputDestination {
	case destinationStdout:
		e.setDryRun(os.Stdout)
	case destinationFile:
		f, err := os.OpenFile(e.cfg.OutputPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("output_path: %w", err)
		}
		e.file = f
		e.setDryRun(f)
	case destinationCloudWatch:
		awsCfg, err := loadAWSConfig(ctx, e.cfg)
		if err != nil {
			return err
		}
		if awsCfg.Region == "" {
			return errors.New("region: not set, and no region found in the AWS environment or shared config")
		}
		if e.answered, err = e.openAnsweredRequests(ctx, host); err != nil {
			return err
		}
		p := newCloudWatchPutter(awsCfg, e.cfg.Endpoint)
		p.requestTimeout = e.cfg.RequestTimeout
		p.answered = e.answered
		e.putter = p
	case destinationAuto:
		var err error
		if e.answered, err = e.openAnsweredRequests(ctx, host); err != nil {
			return err
		}
		e.startAuto(ctx)
	}
	return nil
}

// startAuto decides between CloudWatch and a dry run once it knows: no
// region (or an unreadable AWS configuration) is a dry run at once; with a
// region, credentials are looked up in the background (see
// credentialsResolver) and requests are held in the sending queue meanwhile.
// A configured credentials source that fails is retried, never a dry run.
func (e *cloudWatchExporter) startAuto(ctx context.Context) {
	auto := &autoPutter{dryRun: &dryRunPutter{w: os.Stdout}}
	e.putter = auto
	decide := func(s autoState) {
		if s == autoDryRun {
			e.dryRun.Store(true)
			e.logger.Warn("No AWS region or credentials found: this is a dry run, printing to stdout the PutMetricData requests that would be sent to CloudWatch (set output_destination: cloudwatch to require AWS)")
		}
		auto.state.Store(int32(s))
	}
	awsCfg, err := loadAWSConfig(ctx, e.cfg)
	if err != nil || awsCfg.Region == "" || awsCfg.Credentials == nil {
		if err != nil {
			e.logger.Warn("The AWS configuration cannot be loaded", zap.Error(err))
		}
		decide(autoDryRun)
		return
	}
	configured := credentialSourceConfigured(e.cfg, os.Getenv)
	if !configured && strings.EqualFold(os.Getenv("AWS_EC2_METADATA_DISABLED"), "true") {
		decide(autoDryRun) // no source, and the instance metadata service is off
		return
	}
	cw := newCloudWatchPutter(awsCfg, e.cfg.Endpoint)
	cw.requestTimeout = e.cfg.RequestTimeout
	cw.answered = e.answered
	auto.cloudWatch = cw
	e.resolver = &credentialsResolver{
		creds: awsCfg.Credentials, configured: configured, logger: e.logger,
		decide: decide, backoff: credentialsBackoff,
	}
	e.resolver.resolve(ctx)
}

// reportAutoDryRun shows an auto dry run in the component status (once).
func (e *cloudWatchExporter) reportAutoDryRun() {
	if e.cfg.OutputDestination != destinationAuto || !e.dryRun.Load() || e.host == nil ||
		e.autoDryRunReported.Swap(true) {
		return
	}
	componentstatus.ReportStatus(e.host, componentstatus.NewRecoverableErrorEvent(errAutoDryRun))
}

func (e *cloudWatchExporter) setDryRun(w *os.File) {
	e.putter = &dryRunPutter{w: w}
	e.dryRun.Store(true)
}

func (e *cloudWatchExporter) shutdown(ctx context.Context) error {
	if e.resolver != nil {
		e.resolver.stop()
	}
	err := errors.Join(e.deltas.closeStorage(ctx), e.answered.close(ctx))
	e.telemetry.Shutdown()
	if e.file != nil {
		err = errors.Join(err, e.file.Close())
	}
	return err
}
