// Package buildjobprocessor provides the buildjob component, which turns the
// telemetry of a GPU vector-index build service into build and API metrics.
//
// The component is offered in two classes, like contrib's servicegraph:
//   - a connector (traces -> metrics, logs -> metrics), see NewConnectorFactory,
//     which derives job, stage and API request metrics from spans and job
//     status log records and counts every job run exactly once;
//   - a processor (metrics -> metrics), see NewFactory, which derives
//     api.requests from HTTP server duration histograms and passes all
//     metrics through unchanged.
//
//go:generate mdatagen metadata.yaml
package buildjobprocessor // import "github.com/gpubuild/otelcol-gpubuild/processor/buildjobprocessor"
