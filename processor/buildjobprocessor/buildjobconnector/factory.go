// Package buildjobconnector exposes the buildjob connector under the
// NewFactory name that the collector builder (ocb) calls for every component.
// The implementation lives in the parent package, next to the processor.
package buildjobconnector // import "github.com/gpubuild/otelcol-gpubuild/processor/buildjobprocessor/buildjobconnector"

import (
	"go.opentelemetry.io/collector/connector"

	"github.com/gpubuild/otelcol-gpubuild/processor/buildjobprocessor"
)

// NewFactory returns the buildjob connector factory.
func NewFactory() connector.Factory {
	return buildjobprocessor.NewConnectorFactory()
}
