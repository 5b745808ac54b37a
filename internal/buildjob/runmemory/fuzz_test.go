package runmemory

import (
	"testing"
	"time"
)

// record is one status record or job span as the service sends it.
type record struct {
	kind       byte // 0 start record, 1 end record, 2 job span
	job        string
	start, end time.Duration
}

func (r record) deliver(tr *Tracker[payload], now time.Time) {
	key := Key{Service: "svc", JobID: r.job}
	switch r.kind {
	case 0:
		tr.Start(key, payload{}, ts(r.start), now)
	case 1:
		tr.End(key, payload{}, ts(r.end), "success", now)
	default:
		tr.Span(key, payload{}, ts(r.start), ts(r.end), "success", now)
	}
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
		var counted []Counted[payload]
		tr := newTracker(&counted)
		now := t0.Add(time.Hour)
		for _, r := range deliveries {
			now = now.Add(time.Second)
			r.deliver(tr, now)
		}
		tr.Sweep(now.Add(time.Minute), true)
		if len(counted) != want {
			t.Fatalf("%d runs ended, counted %d; deliveries %+v", want, len(counted), deliveries)
		}
	})
}
