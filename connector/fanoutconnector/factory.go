// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package fanoutconnector // import "github.com/gpubuild/otelcol-gpubuild/connector/fanoutconnector"

import (
	"context"
	"fmt"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"

	"github.com/gpubuild/otelcol-gpubuild/connector/fanoutconnector/internal/metadata"
)

// NewFactory returns the factory of the fanout connector.
func NewFactory() connector.Factory {
	return connector.NewFactory(
		metadata.Type,
		createDefaultConfig,
		connector.WithMetricsToMetrics(createMetricsToMetrics, metadata.MetricsToMetricsStability),
	)
}

func createMetricsToMetrics(_ context.Context, set connector.Settings, cfg component.Config, next consumer.Metrics) (connector.Metrics, error) {
	router, ok := next.(connector.MetricsRouterAndConsumer)
	if !ok {
		return nil, fmt.Errorf("fanout: the collector gave no router over the pipelines fed")
	}
	return newFanout(set, cfg.(*Config), router)
}
