// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package derive

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	otellog "go.opentelemetry.io/otel/log"
)

const (
	running   = "RUNNING_INDEX_BUILD"
	completed = "COMPLETED_INDEX_BUILD"
	failed    = "FAILED_INDEX_BUILD"
)

func ts(t time.Time) pcommon.Timestamp { return pcommon.NewTimestampFromTime(t) }

func TestJobRunsFromStatusRecords(t *testing.T) {
	svc := newTestService(t, newOTLPSink(t))
	d := newConnectorDeriver(testConfig(), t0)

	svc.status("job-a", running, at(0))
	svc.status("job-b", running, at(time.Second))
	d.consumeLogs(svc.logs(), at(2*time.Second))

	ps := points(d.flush(at(10*time.Second), false))
	assert.Empty(t, matching(ps, metricBuildJobs, nil), "no run has ended")
	active := one(t, ps, metricBuildJobsActive, attrs())
	assert.Equal(t, int64(2), active.value)
	assert.Equal(t, "{job}", active.unit)
	assert.Equal(t, "vector-index-build", active.resource["service.name"])

	svc.status("job-a", completed, at(95*time.Second))
	svc.status("job-b", failed, at(31*time.Second))
	d.consumeLogs(svc.logs(), at(96*time.Second))
	ps = points(d.flush(at(100*time.Second), false))

	success := one(t, ps, metricBuildJobs, attrs("build.result", "success"))
	assert.Equal(t, int64(1), success.value)
	assert.Equal(t, "{job}", success.unit)
	assert.True(t, success.monotonic)
	assert.Equal(t, pmetric.AggregationTemporalityDelta, success.temporality)
	assert.Equal(t, ts(at(10*time.Second)), success.start, "a delta point starts at the previous flush")
	assert.Equal(t, ts(at(100*time.Second)), success.ts)
	assert.Equal(t, int64(1), one(t, ps, metricBuildJobs, attrs("build.result", "failure")).value)

	okDur := one(t, ps, metricBuildJobDuration, attrs("build.result", "success"))
	assert.Equal(t, "s", okDur.unit)
	assert.Equal(t, uint64(1), okDur.count)
	assert.Equal(t, 95.0, okDur.sum)
	assert.Equal(t, 95.0, okDur.min)
	assert.Equal(t, 95.0, okDur.max)
	assert.Equal(t, defaultJobDurationBuckets, okDur.bounds)
	// 95 s lies in (60, 120], the sixth bucket.
	wantBuckets := make([]uint64, len(defaultJobDurationBuckets)+1)
	wantBuckets[5] = 1
	assert.Equal(t, wantBuckets, okDur.buckets)

	failDur := one(t, ps, metricBuildJobDuration, attrs("build.result", "failure"))
	assert.Equal(t, 30.0, failDur.sum)
	// 30 s is the upper bound of (10, 30]: bounds are inclusive.
	wantBuckets = make([]uint64, len(defaultJobDurationBuckets)+1)
	wantBuckets[3] = 1
	assert.Equal(t, wantBuckets, failDur.buckets)

	assert.Equal(t, int64(0), one(t, ps, metricBuildJobsActive, attrs()).value, "a group that emptied reports 0 once")

	ps = points(d.flush(at(110*time.Second), false))
	assert.Empty(t, ps, "nothing happened since the last flush")
}

func TestJobRunsFromJobSpans(t *testing.T) {
	svc := newTestService(t, newOTLPSink(t))
	d := newConnectorDeriver(testConfig(), t0)

	svc.jobSpan("job-ok", at(0), at(64*time.Second), codes.Unset)
	svc.jobSpan("job-ok2", at(0), at(128*time.Second), codes.Ok)
	svc.jobSpan("job-err", at(0), at(16*time.Second), codes.Error)
	// The result attribute wins over the status.
	svc.jobSpan("job-cancel", at(0), at(8*time.Second), codes.Error, attribute.String("build.job.result", "cancellation"))
	svc.jobSpan("job-timeout", at(0), at(1800*time.Second), codes.Unset, attribute.String("build.job.result", "timeout"))
	d.consumeTraces(svc.traces(), at(130*time.Second))
	ps := points(d.flush(at(130*time.Second), false))

	assert.Equal(t, int64(2), one(t, ps, metricBuildJobs, attrs("build.result", "success")).value)
	assert.Equal(t, 192.0, one(t, ps, metricBuildJobDuration, attrs("build.result", "success")).sum)
	assert.Equal(t, int64(1), one(t, ps, metricBuildJobs, attrs("build.result", "failure")).value)
	assert.Equal(t, 16.0, one(t, ps, metricBuildJobDuration, attrs("build.result", "failure")).sum)
	assert.Equal(t, int64(1), one(t, ps, metricBuildJobs, attrs("build.result", "cancellation")).value)
	assert.Equal(t, 8.0, one(t, ps, metricBuildJobDuration, attrs("build.result", "cancellation")).sum)
	assert.Equal(t, int64(1), one(t, ps, metricBuildJobs, attrs("build.result", "timeout")).value)
	assert.Empty(t, matching(ps, metricBuildJobDuration, attrs("build.result", "timeout")), "a timeout has no meaningful duration")
	assert.Empty(t, matching(ps, metricBuildJobsActive, nil), "spans alone never make a run active")
}

// A run reported by its job span and its status records is counted once,
// whatever order the three arrive in.
func TestBothSourcesCountedOnceInAnyOrder(t *testing.T) {
	type delivery int
	const (
		startRecord delivery = iota
		endRecord
		jobSpan
	)
	// deduplicated is how many deliveries come after the one that counts
	// the run: the first span or end, or, for an end held for its start,
	// the delivery that completes it.
	orders := []struct {
		order        []delivery
		deduplicated int64
	}{
		{[]delivery{startRecord, jobSpan, endRecord}, 1},
		{[]delivery{startRecord, endRecord, jobSpan}, 1},
		{[]delivery{jobSpan, startRecord, endRecord}, 2},
		{[]delivery{jobSpan, endRecord, startRecord}, 2},
		{[]delivery{endRecord, startRecord, jobSpan}, 1},
		{[]delivery{endRecord, jobSpan, startRecord}, 1},
	}
	names := map[delivery]string{startRecord: "start", endRecord: "end", jobSpan: "span"}
	for _, tc := range orders {
		order := tc.order
		name := names[order[0]] + "," + names[order[1]] + "," + names[order[2]]
		t.Run(name, func(t *testing.T) {
			svc := newTestService(t, newOTLPSink(t))
			d := newConnectorDeriver(testConfig(), t0)
			for i, what := range order {
				now := at(time.Duration(100+i) * time.Second)
				switch what {
				case startRecord:
					svc.status("job-1", running, at(0))
					d.consumeLogs(svc.logs(), now)
				case endRecord:
					svc.status("job-1", completed, at(90*time.Second))
					d.consumeLogs(svc.logs(), now)
				case jobSpan:
					svc.jobSpan("job-1", at(0), at(90*time.Second), codes.Unset)
					d.consumeTraces(svc.traces(), now)
				}
			}
			ps := points(d.flush(at(105*time.Second), false))
			assert.Equal(t, int64(1), total(ps, metricBuildJobs, nil), dump(ps))
			dur := one(t, ps, metricBuildJobDuration, attrs("build.result", "success"))
			assert.Equal(t, uint64(1), dur.count)
			assert.Equal(t, 90.0, dur.sum)
			assert.Equal(t, tc.deduplicated, d.peekStats().deduplicated)
			// Nothing is left to time out later.
			ps = points(d.flush(at(3*time.Hour), false))
			assert.Equal(t, int64(0), total(ps, metricBuildJobs, nil), dump(ps))
		})
	}
}

// When span and records disagree slightly (the span starts after RUNNING is
// logged), a run lasts from the earliest start seen to the first end seen.
func TestBothSourcesDurationRule(t *testing.T) {
	svc := newTestService(t, newOTLPSink(t))
	d := newConnectorDeriver(testConfig(), t0)
	svc.status("job-1", running, at(0))
	d.consumeLogs(svc.logs(), at(time.Second))
	svc.jobSpan("job-1", at(2*time.Second), at(91*time.Second), codes.Unset)
	d.consumeTraces(svc.traces(), at(92*time.Second))
	svc.status("job-1", completed, at(92*time.Second))
	d.consumeLogs(svc.logs(), at(93*time.Second))

	ps := points(d.flush(at(100*time.Second), false))
	assert.Equal(t, int64(1), total(ps, metricBuildJobs, nil))
	assert.Equal(t, 91.0, one(t, ps, metricBuildJobDuration, attrs("build.result", "success")).sum, "RUNNING at 0 to the span's end at 91")
}

func TestDuplicateDeliveryCountedOnce(t *testing.T) {
	svc := newTestService(t, newOTLPSink(t))
	d := newConnectorDeriver(testConfig(), t0)

	svc.status("job-1", running, at(0))
	svc.status("job-1", completed, at(60*time.Second))
	logs := svc.logs()
	svc.jobSpan("job-2", at(0), at(30*time.Second), codes.Unset)
	svc.stageSpan("job-2", "download", at(0), at(10*time.Second), codes.Unset)
	traces := svc.traces()

	// An exporter retrying a batch delivers it again, byte for byte.
	for range 3 {
		d.consumeLogs(logs, at(61*time.Second))
		d.consumeTraces(traces, at(61*time.Second))
	}
	ps := points(d.flush(at(70*time.Second), false))
	assert.Equal(t, int64(2), total(ps, metricBuildJobs, attrs("build.result", "success")))
	assert.Equal(t, 90.0, one(t, ps, metricBuildJobDuration, attrs("build.result", "success")).sum)
	assert.Equal(t, int64(1), total(ps, metricBuildStageRuns, nil))
	// 2 records + 1 job span + 1 stage span, delivered twice more.
	assert.Equal(t, int64(8), d.peekStats().deduplicated)
}

// The service reuses a job id when a build is retried: a start after an end
// is a new run.
func TestRetryWithSameJobIDIsANewRun(t *testing.T) {
	svc := newTestService(t, newOTLPSink(t))
	d := newConnectorDeriver(testConfig(), t0)

	svc.status("job-1", running, at(0))
	svc.status("job-1", failed, at(60*time.Second))
	svc.status("job-1", running, at(120*time.Second))
	svc.status("job-1", completed, at(300*time.Second))
	d.consumeLogs(svc.logs(), at(301*time.Second))
	// The spans of both runs come later and change nothing.
	svc.jobSpan("job-1", at(0), at(60*time.Second), codes.Error)
	svc.jobSpan("job-1", at(120*time.Second), at(300*time.Second), codes.Unset)
	d.consumeTraces(svc.traces(), at(302*time.Second))

	ps := points(d.flush(at(310*time.Second), false))
	assert.Equal(t, int64(1), one(t, ps, metricBuildJobs, attrs("build.result", "failure")).value)
	assert.Equal(t, 60.0, one(t, ps, metricBuildJobDuration, attrs("build.result", "failure")).sum)
	assert.Equal(t, int64(1), one(t, ps, metricBuildJobs, attrs("build.result", "success")).value)
	assert.Equal(t, 180.0, one(t, ps, metricBuildJobDuration, attrs("build.result", "success")).sum)
	assert.Equal(t, int64(2), total(ps, metricBuildJobs, nil))
}

func TestTimeoutCountedOnceAndLateEndIgnored(t *testing.T) {
	svc := newTestService(t, newOTLPSink(t))
	cfg := testConfig()
	d := newConnectorDeriver(cfg, t0)

	svc.status("job-1", running, at(0))
	d.consumeLogs(svc.logs(), at(time.Second))

	// job_timeout (30 min) is measured from the start's arrival at 1 s.
	ps := points(d.flush(at(30*time.Minute), false))
	assert.Empty(t, matching(ps, metricBuildJobs, nil))
	assert.Equal(t, int64(1), one(t, ps, metricBuildJobsActive, attrs()).value)

	ps = points(d.flush(at(30*time.Minute+time.Second), false))
	assert.Equal(t, int64(1), one(t, ps, metricBuildJobs, attrs("build.result", "timeout")).value)
	assert.Empty(t, matching(ps, metricBuildJobDuration, nil))
	assert.Equal(t, int64(0), one(t, ps, metricBuildJobsActive, attrs()).value)

	// The service finishes after all: neither the end record nor the span
	// counts the run again.
	svc.status("job-1", completed, at(35*time.Minute))
	d.consumeLogs(svc.logs(), at(35*time.Minute))
	svc.jobSpan("job-1", at(0), at(35*time.Minute), codes.Unset)
	d.consumeTraces(svc.traces(), at(35*time.Minute))
	ps = points(d.flush(at(36*time.Minute), false))
	assert.Empty(t, matching(ps, metricBuildJobs, nil), dump(ps))
	assert.Equal(t, int64(2), d.peekStats().deduplicated)

	// A later retry is a new run.
	svc.status("job-1", running, at(40*time.Minute))
	d.consumeLogs(svc.logs(), at(40*time.Minute))
	ps = points(d.flush(at(41*time.Minute), false))
	assert.Equal(t, int64(1), one(t, ps, metricBuildJobsActive, attrs()).value)
}

// The service process restarts mid-build: the run it had started never
// ends (timeout, on the old instance); the client's retry with the same job
// id runs on the new instance and succeeds.
func TestServiceRestartMidRun(t *testing.T) {
	sink := newOTLPSink(t)
	before := newTestService(t, sink, attribute.String("service.name", "vector-index-build"), attribute.String("service.instance.id", "pod-a"))
	d := newConnectorDeriver(testConfig(), t0)
	before.status("job-1", running, at(0))
	d.consumeLogs(before.logs(), at(time.Second))

	after := newTestService(t, sink, attribute.String("service.name", "vector-index-build"), attribute.String("service.instance.id", "pod-b"))
	after.status("job-1", running, at(120*time.Second))
	after.status("job-1", completed, at(300*time.Second))
	d.consumeLogs(after.logs(), at(301*time.Second))
	after.jobSpan("job-1", at(120*time.Second), at(300*time.Second), codes.Unset)
	d.consumeTraces(after.traces(), at(301*time.Second))

	ps := points(d.flush(at(310*time.Second), false))
	ok := one(t, ps, metricBuildJobs, attrs("build.result", "success"))
	assert.Equal(t, int64(1), ok.value)
	assert.Equal(t, "pod-b", ok.resource["service.instance.id"])
	assert.Equal(t, 180.0, one(t, ps, metricBuildJobDuration, attrs("build.result", "success")).sum)
	act := one(t, ps, metricBuildJobsActive, attrs())
	assert.Equal(t, int64(1), act.value)
	assert.Equal(t, "pod-a", act.resource["service.instance.id"])

	ps = points(d.flush(at(31*time.Minute), false))
	to := one(t, ps, metricBuildJobs, attrs("build.result", "timeout"))
	assert.Equal(t, int64(1), to.value)
	assert.Equal(t, "pod-a", to.resource["service.instance.id"])
	assert.Equal(t, int64(1), total(ps, metricBuildJobs, nil))
}

func TestEndArrivingBeforeStart(t *testing.T) {
	t.Run("start arrives before the next flush", func(t *testing.T) {
		svc := newTestService(t, newOTLPSink(t))
		d := newConnectorDeriver(testConfig(), t0)
		svc.status("job-1", completed, at(90*time.Second))
		d.consumeLogs(svc.logs(), at(91*time.Second))
		svc.status("job-1", running, at(0))
		d.consumeLogs(svc.logs(), at(92*time.Second))

		ps := points(d.flush(at(100*time.Second), false))
		assert.Equal(t, int64(1), one(t, ps, metricBuildJobs, attrs("build.result", "success")).value)
		assert.Equal(t, 90.0, one(t, ps, metricBuildJobDuration, attrs("build.result", "success")).sum)
		assert.Empty(t, matching(ps, metricBuildJobsActive, nil))
	})
	t.Run("start never arrives", func(t *testing.T) {
		svc := newTestService(t, newOTLPSink(t))
		d := newConnectorDeriver(testConfig(), t0)
		svc.status("job-1", failed, at(90*time.Second))
		d.consumeLogs(svc.logs(), at(95*time.Second))

		// Held for one flush interval (10 s) in case the start comes.
		ps := points(d.flush(at(100*time.Second), false))
		assert.Empty(t, matching(ps, metricBuildJobs, nil))
		ps = points(d.flush(at(110*time.Second), false))
		assert.Equal(t, int64(1), one(t, ps, metricBuildJobs, attrs("build.result", "failure")).value)
		assert.Empty(t, matching(ps, metricBuildJobDuration, nil), "no start, no duration")

		// The start arrives after all: it belongs to the counted run, so it
		// neither counts again nor leaves an active run to time out.
		svc.status("job-1", running, at(0))
		d.consumeLogs(svc.logs(), at(120*time.Second))
		ps = points(d.flush(at(2*time.Hour), false))
		assert.Empty(t, ps, dump(ps))
	})
	t.Run("span arrives after the end record", func(t *testing.T) {
		svc := newTestService(t, newOTLPSink(t))
		d := newConnectorDeriver(testConfig(), t0)
		svc.status("job-1", completed, at(90*time.Second))
		d.consumeLogs(svc.logs(), at(91*time.Second))
		svc.jobSpan("job-1", at(0), at(90*time.Second), codes.Unset)
		d.consumeTraces(svc.traces(), at(92*time.Second))
		ps := points(d.flush(at(93*time.Second), false))
		assert.Equal(t, int64(1), total(ps, metricBuildJobs, nil))
		assert.Equal(t, 90.0, one(t, ps, metricBuildJobDuration, attrs("build.result", "success")).sum)
	})
	t.Run("shutdown counts a held end at once", func(t *testing.T) {
		svc := newTestService(t, newOTLPSink(t))
		d := newConnectorDeriver(testConfig(), t0)
		svc.status("job-1", completed, at(90*time.Second))
		d.consumeLogs(svc.logs(), at(91*time.Second))
		ps := points(d.flush(at(92*time.Second), true))
		assert.Equal(t, int64(1), one(t, ps, metricBuildJobs, attrs("build.result", "success")).value)
	})
}

func TestEndStampedBeforeItsStartIsSkipped(t *testing.T) {
	svc := newTestService(t, newOTLPSink(t))
	d := newConnectorDeriver(testConfig(), t0)
	svc.status("job-1", running, at(100*time.Second))
	svc.status("job-1", completed, at(50*time.Second))
	d.consumeLogs(svc.logs(), at(101*time.Second))

	assert.Equal(t, int64(1), d.peekStats().skipped[skipEndBeforeStart])
	ps := points(d.flush(at(110*time.Second), false))
	assert.Empty(t, matching(ps, metricBuildJobs, nil))
	assert.Equal(t, int64(1), one(t, ps, metricBuildJobsActive, attrs()).value)
}

func TestMalformedInputIsSkippedAndCounted(t *testing.T) {
	svc := newTestService(t, newOTLPSink(t))
	d := newConnectorDeriver(testConfig(), t0)

	svc.span("index_build", at(0), at(10*time.Second), spanOpts{attrs: []attribute.KeyValue{attribute.Int("build.job.id", 42)}})
	svc.span("index_build", at(0), at(10*time.Second), spanOpts{attrs: []attribute.KeyValue{attribute.String("build.job.id", "")}})
	svc.jobSpan("job-bad-result", at(0), at(10*time.Second), codes.Unset, attribute.String("build.job.result", "exploded"))
	svc.jobSpan("job-bad-result-type", at(0), at(10*time.Second), codes.Unset, attribute.Bool("build.job.result", true))
	svc.span("upload", at(0), at(time.Second), spanOpts{attrs: []attribute.KeyValue{attribute.Int("build.stage", 3)}})
	svc.jobSpan("job-good", at(0), at(20*time.Second), codes.Unset)
	d.consumeTraces(svc.traces(), at(30*time.Second))

	var rec otellog.Record
	rec.SetTimestamp(at(time.Second))
	rec.AddAttributes(attribute.String("build.job.status", running)) // no job id
	svc.logger.Emit(t.Context(), rec)
	var rec2 otellog.Record
	rec2.SetTimestamp(at(time.Second))
	rec2.AddAttributes(attribute.Int("build.job.id", 7), attribute.String("build.job.status", running))
	svc.logger.Emit(t.Context(), rec2)
	var rec3 otellog.Record
	rec3.SetTimestamp(at(time.Second))
	rec3.AddAttributes(attribute.String("build.job.id", "job-x"), attribute.Int("build.job.status", 1))
	svc.logger.Emit(t.Context(), rec3)
	svc.status("job-other-status", "QUEUED", at(time.Second)) // not in job_status: ignored, not malformed
	svc.status("job-good-log", running, at(time.Second))
	d.consumeLogs(svc.logs(), at(30*time.Second))

	assert.Equal(t, int64(5), d.peekStats().skipped[skipWrongType], "int job id on a span and on a record, bool result, int stage, int status")
	assert.Equal(t, int64(2), d.peekStats().skipped[skipInvalidValue], "empty job id, unknown result")
	assert.Equal(t, int64(1), d.peekStats().skipped[skipMissingAttribute], "status without job id")
	assert.Equal(t, int64(0), d.peekStats().skipped[skipNegativeDuration])
	ps := points(d.flush(at(30*time.Second), false))
	assert.Equal(t, int64(1), total(ps, metricBuildJobs, nil), "the good span is still counted")
	assert.Equal(t, int64(1), one(t, ps, metricBuildJobsActive, attrs()).value, "the good record is still counted")
}

func TestMalformedTimestampsAreSkipped(t *testing.T) {
	// The SDK always stamps spans and fills the observed timestamp of log
	// records, so these shapes can only come from other senders: built here
	// as pdata.
	d := newConnectorDeriver(testConfig(), t0)
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "vector-index-build")
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	backwards := spans.AppendEmpty()
	backwards.Attributes().PutStr("build.job.id", "job-1")
	backwards.SetStartTimestamp(ts(at(10 * time.Second)))
	backwards.SetEndTimestamp(ts(at(5 * time.Second)))
	unended := spans.AppendEmpty()
	unended.Attributes().PutStr("build.stage", "upload")
	unended.SetStartTimestamp(ts(at(10 * time.Second)))
	d.consumeTraces(td, at(20*time.Second))
	assert.Equal(t, int64(1), d.peekStats().skipped[skipNegativeDuration])
	assert.Equal(t, int64(1), d.peekStats().skipped[skipMissingTimestamp])

	svc := newTestService(t, newOTLPSink(t))
	svc.status("job-2", running, at(0))
	ld := svc.logs()
	lr := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0)
	lr.SetTimestamp(0)
	lr.SetObservedTimestamp(0)
	d.consumeLogs(ld, at(20*time.Second))
	assert.Equal(t, int64(2), d.peekStats().skipped[skipMissingTimestamp])
	assert.Empty(t, points(d.flush(at(30*time.Second), false)))
}

func TestObservedTimestampIsTheFallback(t *testing.T) {
	svc := newTestService(t, newOTLPSink(t))
	d := newConnectorDeriver(testConfig(), t0)
	svc.status("job-1", running, at(0))
	svc.status("job-1", completed, at(45*time.Second))
	ld := svc.logs()
	records := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords()
	for i := 0; i < records.Len(); i++ {
		records.At(i).SetObservedTimestamp(records.At(i).Timestamp())
		records.At(i).SetTimestamp(0)
	}
	d.consumeLogs(ld, at(50*time.Second))
	ps := points(d.flush(at(50*time.Second), false))
	assert.Equal(t, 45.0, one(t, ps, metricBuildJobDuration, attrs("build.result", "success")).sum)
}
