// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derive

import (
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Input attributes (the contract in docs/build-service-contract.md).
const (
	attrBuildJobID       = "build.job.id"
	attrBuildJobStatus   = "build.job.status"
	attrBuildJobResult   = "build.job.result"
	attrBuildStageResult = "build.stage.result"
	attrServiceName      = "service.name"

	// HTTP attributes: stable semantic conventions first, then the older names
	// that opentelemetry-instrumentation-fastapi still emits by default.
	attrHTTPRequestMethod     = "http.request.method"
	attrHTTPMethodOld         = "http.method"
	attrHTTPResponseStatus    = "http.response.status_code"
	attrHTTPStatusCodeOld     = "http.status_code"
	attrURLPath               = "url.path"
	attrHTTPTargetOld         = "http.target"
	metricHTTPServerDuration  = "http.server.request.duration"
	metricHTTPServerDurationO = "http.server.duration"
)

// Output attributes and metric names (fixed by the issue).
const (
	attrBuildResult     = "build.result"
	attrBuildStage      = "build.stage"
	attrHTTPRoute       = "http.route"
	attrHTTPMethod      = "http.request.method"
	attrHTTPStatusClass = "http.response.status_class"

	metricBuildJobs          = "build.jobs"
	metricBuildJobDuration   = "build.job.duration"
	metricBuildGPUEnergy     = "build.gpu.energy"
	metricBuildGPUBusyTime   = "build.gpu.busy_time"
	metricBuildGPUMemoryPeak = "build.gpu.memory.peak"
	metricBuildGPUSMActivity = "build.gpu.sm_activity"
	metricBuildGPUTensor     = "build.gpu.tensor_activity"

	metricBuildStageGPUEnergy     = "build.stage.gpu.energy"
	metricBuildStageGPUBusyTime   = "build.stage.gpu.busy_time"
	metricBuildStageGPUMemoryPeak = "build.stage.gpu.memory.peak"
	metricBuildStageGPUSMActivity = "build.stage.gpu.sm_activity"
	metricBuildStageGPUTensor     = "build.stage.gpu.tensor_activity"
	metricBuildStageRuns          = "build.stage.runs"
	metricBuildStageDuration      = "build.stage.duration"
	metricBuildJobsActive         = "build.jobs.active"
	metricAPIRequests             = "api.requests"
	metricAPIRequestDuration      = "api.request.duration"
)

// Values of build.result.
const (
	resultSuccess      = "success"
	resultFailure      = "failure"
	resultTimeout      = "timeout"
	resultCancellation = "cancellation"
)

// skipReason says why a span, record or data point was skipped. The values
// are the reason attribute of otelcol_buildjob_records_skipped.
type skipReason uint8

const (
	skipMissingAttribute skipReason = iota
	skipWrongType
	skipInvalidValue
	skipMissingTimestamp
	skipNegativeDuration
	skipEndBeforeStart
	numSkipReasons
)

func (r skipReason) String() string {
	switch r {
	case skipMissingAttribute:
		return "missing_attribute"
	case skipWrongType:
		return "wrong_type"
	case skipInvalidValue:
		return "invalid_value"
	case skipMissingTimestamp:
		return "missing_timestamp"
	case skipNegativeDuration:
		return "negative_duration"
	case skipEndBeforeStart:
		return "end_before_start"
	}
	return "unknown"
}

// parseResult validates a build.job.result or build.stage.result value. It
// returns the canonical constant so that no per-span string is retained.
func parseResult(s string) (string, bool) {
	switch s {
	case resultSuccess:
		return resultSuccess, true
	case resultFailure:
		return resultFailure, true
	case resultTimeout:
		return resultTimeout, true
	case resultCancellation:
		return resultCancellation, true
	}
	return "", false
}

// normalizeMethod keeps the known HTTP methods and folds everything else into
// _OTHER, as the HTTP semantic conventions do, so a client sending arbitrary
// methods cannot create unbounded series.
func normalizeMethod(m string) string {
	switch m {
	case "GET":
		return "GET"
	case "POST":
		return "POST"
	case "PUT":
		return "PUT"
	case "DELETE":
		return "DELETE"
	case "HEAD":
		return "HEAD"
	case "PATCH":
		return "PATCH"
	case "OPTIONS":
		return "OPTIONS"
	case "CONNECT":
		return "CONNECT"
	case "TRACE":
		return "TRACE"
	case "QUERY":
		return "QUERY"
	}
	return "_OTHER"
}

var statusClasses = [...]string{"", "1xx", "2xx", "3xx", "4xx", "5xx"}

// statusClass returns the class of an HTTP status code value: an int, or a
// string holding an int (some instrumentations send strings).
func statusClass(v pcommon.Value) (string, skipReason, bool) {
	var code int64
	switch v.Type() {
	case pcommon.ValueTypeInt:
		code = v.Int()
	case pcommon.ValueTypeStr:
		n, err := strconv.ParseInt(v.Str(), 10, 64)
		if err != nil {
			return "", skipWrongType, false
		}
		code = n
	default:
		return "", skipWrongType, false
	}
	if code < 100 || code > 599 {
		return "", skipInvalidValue, false
	}
	return statusClasses[code/100], 0, true
}

// responseClass is the class of the HTTP response status code in attrs
// (the stable attribute, else the old one); a missing or unusable code is
// counted as skipped.
func (d *deriver) responseClass(attrs pcommon.Map) (string, bool) {
	codeV, ok := firstPresent(attrs, attrHTTPResponseStatus, attrHTTPStatusCodeOld)
	if !ok {
		d.stats.skipped[skipMissingAttribute]++
		return "", false
	}
	class, reason, ok := statusClass(codeV)
	if !ok {
		d.stats.skipped[reason]++
		return "", false
	}
	return class, true
}

// httpRoute is the route template in attrs, "" when there is none; one
// that is not a string is counted as skipped. The route template only:
// url.path holds job ids (/_status/{job_id}) and would make cardinality
// unbounded.
func (d *deriver) httpRoute(attrs pcommon.Map) (string, bool) {
	v, ok := attrs.Get(attrHTTPRoute)
	if !ok {
		return "", true
	}
	if v.Type() != pcommon.ValueTypeStr {
		d.stats.skipped[skipWrongType]++
		return "", false
	}
	return v.Str(), true
}

// firstPresent returns the first of the given attributes that is set.
func firstPresent(attrs pcommon.Map, keys ...string) (pcommon.Value, bool) {
	for _, k := range keys {
		if v, ok := attrs.Get(k); ok {
			return v, true
		}
	}
	return pcommon.Value{}, false
}
