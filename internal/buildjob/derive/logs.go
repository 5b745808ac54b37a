// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derive

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/gpubuild/otelcol-gpubuild/internal/buildjob/gpujoin"
	"github.com/gpubuild/otelcol-gpubuild/internal/buildjob/runmemory"
)

// consumeLogs feeds job status log records to the job tracker.
func (d *deriver) consumeLogs(ld plog.Logs, now time.Time) {
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		rl := rls.At(i)
		var res *resourceEntry // interned on the first status record only
		sls := rl.ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			records := sls.At(j).LogRecords()
			for k := 0; k < records.Len(); k++ {
				lr := records.At(k)
				if _, ok := lr.Attributes().Get(attrBuildJobStatus); !ok {
					continue // not a job status record
				}
				if res == nil {
					res = d.resources.intern(rl.Resource())
				}
				d.statusRecord(res, lr, now)
			}
		}
	}
}

// statusRecord handles a record with build.job.status. Status values not in
// job_status are ignored: the service may report states this component does
// not count.
func (d *deriver) statusRecord(res *resourceEntry, lr plog.LogRecord, now time.Time) {
	attrs := lr.Attributes()
	statusV, _ := attrs.Get(attrBuildJobStatus)
	if statusV.Type() != pcommon.ValueTypeStr {
		d.stats.skipped[skipWrongType]++
		return
	}
	action, ok := d.jobStatus[statusV.Str()]
	if !ok {
		return
	}
	idV, ok := attrs.Get(attrBuildJobID)
	if !ok {
		d.stats.skipped[skipMissingAttribute]++
		return
	}
	if idV.Type() != pcommon.ValueTypeStr {
		d.stats.skipped[skipWrongType]++
		return
	}
	if idV.Str() == "" {
		d.stats.skipped[skipInvalidValue]++
		return
	}
	ts := lr.Timestamp()
	if ts == 0 {
		ts = lr.ObservedTimestamp()
	}
	if ts == 0 {
		d.stats.skipped[skipMissingTimestamp]++
		return
	}
	key := runmemory.Key{Service: res.serviceName, JobID: idV.Str()}
	p := runPayload{res: res, dims: d.resolveDims(attrs, res), gpu: gpujoin.HintFrom(attrs)}
	switch action {
	case StatusActionStart:
		d.jobs.Start(key, p, ts, now)
	case StatusActionSuccess:
		d.jobs.End(key, p, ts, resultSuccess, now)
	case StatusActionFailure:
		d.jobs.End(key, p, ts, resultFailure, now)
	case StatusActionCancellation:
		d.jobs.End(key, p, ts, resultCancellation, now)
	}
}
