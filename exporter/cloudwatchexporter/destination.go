// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter // import "github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter"

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.uber.org/zap"

	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/send"
)

// errAutoDryRun is the component status of an auto dry run: nothing reaches CloudWatch.
var errAutoDryRun = errors.New("dry run: no AWS region or credentials found, printing PutMetricData requests to stdout instead of sending them")

// start is exporterhelper's start hook: it restores the cumulative state and
// opens the output destination.
func (m *metricsExporter) start(ctx context.Context, host component.Host) error {
	m.host = host
	if err := m.openState(ctx, host); err != nil {
		return err
	}
	switch m.cfg.OutputDestination {
	case destinationStdout:
		m.setDryRun(os.Stdout)
	case destinationFile:
		f, err := os.OpenFile(m.cfg.OutputPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("output_path: %w", err)
		}
		m.file = f
		m.setDryRun(f)
	case destinationCloudWatch:
		awsCfg, err := send.LoadAWSConfig(ctx, awsSourceOf(m.cfg))
		if err != nil {
			return err
		}
		if awsCfg.Region == "" {
			return errors.New("region: not set, and no region found in the AWS environment or shared config")
		}
		if m.answered, err = m.openAnsweredRequests(ctx, host); err != nil {
			return err
		}
		p := send.NewCloudWatchPutter(awsCfg, m.cfg.Endpoint)
		p.RequestTimeout = m.cfg.RequestTimeout
		p.Answered = m.answered
		m.putter = p
	case destinationAuto:
		var err error
		if m.answered, err = m.openAnsweredRequests(ctx, host); err != nil {
			return err
		}
		m.startAuto(ctx)
	}
	return nil
}

// startAuto decides between CloudWatch and a dry run once it knows: no
// region (or an unreadable AWS configuration) is a dry run at once; with a
// region, credentials are looked up in the background (see
// credentialsResolver) and requests are held in the sending queue meanwhile.
// A configured credentials source that fails is retried, never a dry run.
func (m *metricsExporter) startAuto(ctx context.Context) {
	auto := &send.AutoPutter{DryRun: &send.DryRunPutter{W: os.Stdout}}
	m.putter = auto
	decide := func(s send.AutoState) {
		if s == send.AutoDryRun {
			m.dryRun.Store(true)
			m.logger.Warn("No AWS region or credentials found: this is a dry run, printing to stdout the PutMetricData requests that would be sent to CloudWatch (set output_destination: cloudwatch to require AWS)")
		}
		auto.State.Store(int32(s))
	}
	awsCfg, err := send.LoadAWSConfig(ctx, awsSourceOf(m.cfg))
	if err != nil || awsCfg.Region == "" || awsCfg.Credentials == nil {
		if err != nil {
			m.logger.Warn("The AWS configuration cannot be loaded", zap.Error(err))
		}
		decide(send.AutoDryRun)
		return
	}
	configured := send.CredentialSourceConfigured(awsSourceOf(m.cfg), os.Getenv)
	if !configured && strings.EqualFold(os.Getenv("AWS_EC2_METADATA_DISABLED"), "true") {
		decide(send.AutoDryRun) // no source, and the instance metadata service is off
		return
	}
	cw := send.NewCloudWatchPutter(awsCfg, m.cfg.Endpoint)
	cw.RequestTimeout = m.cfg.RequestTimeout
	cw.Answered = m.answered
	auto.CloudWatch = cw
	m.resolver = &send.CredentialsResolver{
		Creds: awsCfg.Credentials, Configured: configured, Logger: m.logger,
		Decide: decide, Backoff: send.CredentialsBackoff,
	}
	m.resolver.Resolve(ctx)
}

// reportAutoDryRun shows an auto dry run in the component status (once).
func (m *metricsExporter) reportAutoDryRun() {
	if m.cfg.OutputDestination != destinationAuto || !m.dryRun.Load() || m.host == nil ||
		m.autoDryRunReported.Swap(true) {
		return
	}
	componentstatus.ReportStatus(m.host, componentstatus.NewRecoverableErrorEvent(errAutoDryRun))
}

func (m *metricsExporter) setDryRun(w *os.File) {
	m.putter = &send.DryRunPutter{W: w}
	m.dryRun.Store(true)
}

func (m *metricsExporter) shutdown(ctx context.Context) error {
	if m.resolver != nil {
		m.resolver.Stop()
	}
	err := errors.Join(m.deltas.CloseStorage(ctx), m.answered.Close(ctx))
	m.telemetry.Shutdown()
	if m.file != nil {
		err = errors.Join(err, m.file.Close())
	}
	return err
}
