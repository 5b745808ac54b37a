// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package buildjobprocessor

import "go.opentelemetry.io/collector/component"

// What the processor assumes of the collector beyond its documented API is
// in this file. The guard test is TestAPIRequestsFromSpansStandsTheProcessorDown
// in test/distro: it runs the built collector and fails when its host no
// longer hands out factories, so that the processor would not see the
// connector and both would count api.requests.

// factoryHost is implemented by the collector's host (not part of
// component.Host): it hands out the factories of the running collector.
type factoryHost interface {
	GetFactory(kind component.Kind, componentType component.Type) component.Factory
}

// apiRequestSources is implemented by the buildjob connector's factory: the
// connectors it created that derive api.requests from spans.
type apiRequestSources interface {
	APIRequestsFromSpans() []component.ID
}

// connectorsCountingAPIRequests lists the buildjob connectors of the
// running collector that derive api.requests from spans.
func connectorsCountingAPIRequests(host component.Host) []component.ID {
	fh, ok := host.(factoryHost)
	if !ok {
		return nil
	}
	src, ok := fh.GetFactory(component.KindConnector, connectorType).(apiRequestSources)
	if !ok {
		return nil
	}
	return src.APIRequestsFromSpans()
}
