// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package runmemory

import (
	"slices"
	"testing"
	"time"
)

// record is one status record or job span as the service sends it.
type record struct {
	kind       byte // 0 start record, 1 end record, 2 job span
	job        string
	start, end time.Duration
	result     string // "success" when empty
}

func (r record) deliver(tr *Tracker[payload], now time.Time) {
	key := Key{Service: "svc", JobID: r.job}
	result := r.result
	if result == "" {
		result = "success"
	}
	switch r.kind {
	case 0:
		tr.Start(key, payload{}, ts(r.start), now)
	case 1:
		tr.End(key, payload{}, ts(r.end), result, now)
	default:
		tr.Span(key, payload{}, ts(r.start), ts(r.end), result, now)
	}
}

// countDeliveries hands the deliveries to a new tracker one second apart,
// sweeps it for the last time and returns what it counted.
func countDeliveries(deliveries []record) []Counted[payload] {
	var counted []Counted[payload]
	tr := newTracker(&counted)
	now := t0.Add(time.Hour)
	for _, r := range deliveries {
		now = now.Add(time.Second)
		r.deliver(tr, now)
	}
	tr.Sweep(now.Add(time.Minute), true)
	return counted
}

// history reads one run of each of up to eight jobs, two bytes a run:
// which of its three records the service sent, and the run's start and
// duration. It returns the records and how many runs should be counted:
// those with an end record or a span.
func history(data []byte) ([]record, int) {
	var recs []record
	want := 0
	for i := 0; i+2 <= len(data) && i < 2*8; i += 2 {
		job := string('a' + rune(i/2))
		start := time.Duration(data[i]>>4) * time.Second
		end := start + time.Duration(data[i+1]%100+1)*time.Second
		for kind := byte(0); kind < 3; kind++ {
			if data[i]>>kind&1 == 1 {
				recs = append(recs, record{kind: kind, job: job, start: start, end: end})
			}
		}
		if data[i]&0b110 != 0 {
			want++
		}
	}
	return recs, want
}

// However a run's records arrive (in any order, the jobs interleaved) and
// however often each arrives again, at any later time (an SDK's retries),
// every run is counted exactly once: those with an end record or a span.
//
// One run per job id: records of two runs of one job id that cross each
// other are a known limit of the matching rules (the connector's README,
// "How runs are counted").
func FuzzRunCountedOnceInAnyOrder(f *testing.F) {
	f.Add([]byte{7, 40, 0x35, 9, 6, 30}, []byte{5, 0, 3, 0x81, 4, 2, 7, 0x97, 0})
	f.Add([]byte{3, 10, 5, 20, 6, 30, 4, 5}, []byte{9, 1, 8, 0, 3, 3, 2})
	f.Fuzz(func(t *testing.T, data, order []byte) {
		left, want := history(data)
		// order picks the next record among those left, and (high bit) a
		// record delivered before to deliver again.
		var deliveries []record
		for i := 0; len(left) > 0; i++ {
			var o byte
			if i < len(order) {
				o = order[i]
			}
			k := int(o&0x7f) % len(left)
			deliveries = append(deliveries, left[k])
			left = append(left[:k], left[k+1:]...)
			if o&0x80 != 0 {
				deliveries = append(deliveries, deliveries[int(o>>3)%len(deliveries)])
			}
		}
		counted := countDeliveries(deliveries)
		if len(counted) != want {
			t.Fatalf("%d runs ended, counted %d; deliveries %+v", want, len(counted), deliveries)
		}
	})
}

// retriedRuns reads up to four runs of one job id, one after another as a
// service that retries a build under its id runs them, three bytes a run:
// which records the service sent (bit 0 start, bit 1 end, bit 2 span),
// whether the end record is written inside the span (bit 3) or after it,
// the queueing delay between the start record and the span's start, the
// run's duration, and the pause before the next run is accepted. It
// returns the status records and the spans, each stream in the order the
// service wrote it, and the result of every run that should be counted.
func retriedRuns(data []byte) (logs, spans []record, want []string) {
	at := time.Duration(0)
	for i := 0; i+3 <= len(data) && i < 3*4; i += 3 {
		flags, queued, length := data[i], data[i+1], data[i+2]
		result := string('p' + rune(i/3))
		accepted := at
		start := accepted + time.Duration(queued%16)*time.Second
		end := start + time.Duration(length%100+1)*time.Second
		endRecord := end + time.Duration(flags>>4)*time.Millisecond
		if flags&8 != 0 {
			endRecord = end - time.Duration(flags>>4)*time.Millisecond
		}
		logs = append(logs,
			record{kind: 0, job: "a", start: accepted, result: result},
			record{kind: 1, job: "a", end: endRecord, result: result})
		if flags&4 != 0 {
			spans = append(spans, record{kind: 2, job: "a", start: start, end: end, result: result})
		}
		want = append(want, result)
		at = max(end, endRecord) + time.Duration(length/100)*time.Second + time.Millisecond
	}
	return logs, spans, want
}

// A build retried under its job id: runs of one id one after another.
// Each of the service's two streams (status records, spans) arrives in
// the order it was written, as an SDK's exporter sends its batches, but
// the two interleave in any way, and any record may arrive again at any
// later time. Every run with an end record or a span is counted once,
// with its own result.
func FuzzRetriedRunsCountedOnce(f *testing.F) {
	f.Add([]byte{7, 2, 40, 7, 0, 30, 0x1f, 3, 250}, []byte{1, 1, 0, 0x80, 1, 0, 0})
	f.Add([]byte{6, 0, 10, 5, 1, 10, 7, 0, 1, 3, 0, 5}, []byte{0, 0, 0, 1, 1, 0x91, 1})
	f.Fuzz(func(t *testing.T, data, order []byte) {
		logs, spans, want := retriedRuns(data)
		// order's bit 0 picks the stream the next record comes from; its
		// high bit delivers a record delivered before again.
		var deliveries []record
		for i := 0; len(logs)+len(spans) > 0; i++ {
			var o byte
			if i < len(order) {
				o = order[i]
			}
			if len(spans) == 0 || o&1 == 0 && len(logs) > 0 {
				deliveries, logs = append(deliveries, logs[0]), logs[1:]
			} else {
				deliveries, spans = append(deliveries, spans[0]), spans[1:]
			}
			if o&0x80 != 0 {
				deliveries = append(deliveries, deliveries[int(o>>3&0xf)%len(deliveries)])
			}
		}
		var got []string
		for _, c := range countDeliveries(deliveries) {
			got = append(got, c.Result)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("runs %v, counted %v; deliveries %+v", want, got, deliveries)
		}
	})
}
