// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
)

// resendBoundPerKill is how many datums one kill -9 may send twice with
// testdata/collector.yaml.tmpl and this test's requests: the requests of
// the item being sent at the kill that CloudWatch stored (whether its
// answer reached the exporter and was not yet recorded, or was still on
// its way). The queue has one consumer (the exporter's default) and each
// OTLP request here is one item of one data point: one request of one
// datum.
const resendBoundPerKill = 1

// Environment settings of TestKill9AtRandomInstantsWhileSending, for
// measurements: how many kills, and another binary to measure (a previous
// build, to compare).
const (
	killWindowKillsEnv  = "KILL_WINDOW_KILLS"
	killWindowBinaryEnv = "KILL_WINDOW_BIN"
)

// The collector is killed (SIGKILL) at random instants while it sends
// every acknowledged request to CloudWatch, which answers after 20 ms, and
// restarted on its state directory, many times; every other kill is timed
// to land 0 to 500 µs after CloudWatch answered, nothing else in flight.
// Every request carries one data point of its own timestamp, so a datum
// landing twice is seen, and when CloudWatch stored it first tells which
// window the kill fell in: after that answer (answered, not yet recorded:
// by the exporter's record of answered requests, one storage write after
// the answer; before it, by the queue's deletion of the item), or before
// it (the request on its way: CloudWatch stores what it received although
// its sender died, which no sender can prevent without an idempotent API).
// It requires that nothing acknowledged is lost and that no kill sends
// more than resendBoundPerKill datums twice (docs/guarantees.md), and
// reports the distribution.
func TestKill9AtRandomInstantsWhileSending(t *testing.T) {
	kills := 12
	if v, err := strconv.Atoi(os.Getenv(killWindowKillsEnv)); err == nil && v > 0 {
		kills = v
	}
	bin := binary(t)
	if b := os.Getenv(killWindowBinaryEnv); b != "" {
		bin = b
	}
	e := newEnv(t)
	e.cw.SetFaults(cloudwatchtest.Faults{Latency: 20 * time.Millisecond})
	base := time.Now().Add(-time.Minute).Truncate(time.Second)
	var storedMu sync.Mutex
	stored := map[int64][]time.Time{}   // when CloudWatch stored each probe datum
	answered := make(chan time.Time, 1) // an answer came, for kills timed to one
	var lastAnswer atomic.Int64
	e.cw.OnAccept(func(ds []cloudwatchtest.Datum) {
		now := time.Now()
		storedMu.Lock()
		defer storedMu.Unlock()
		for _, d := range ds {
			if d.MetricName == "kill.probe" {
				stamp := d.Timestamp.Sub(base).Milliseconds()
				stored[stamp] = append(stored[stamp], now)
			}
		}
		lastAnswer.Store(now.UnixNano())
		select {
		case answered <- now:
		default: // one not yet taken is as good
		}
	})

	url := fmt.Sprintf("http://127.0.0.1:%d/v1/metrics", e.http)
	client := &http.Client{Timeout: 10 * time.Second}
	acked := map[int64]bool{}
	next := int64(0)
	// send posts one request of one point; its timestamp (ms) identifies it.
	send := func() {
		stamp := next
		next++
		body := probeRequest(t, base.Add(time.Duration(stamp)*time.Millisecond))
		resp, err := client.Post(url, "application/x-protobuf", bytes.NewReader(body))
		if err == nil {
			acked[stamp] = resp.StatusCode == http.StatusOK
			resp.Body.Close()
		}
	}

	killedAt := make([]time.Time, kills)
	var runs []*collector
	for k := range kills {
		runs = append(runs, e.startCollectorOn(bin, e.config))
		// Requests for a random time, then the kill at a random instant
		// of the sending that goes on after the last one.
		for stop := time.Now().Add(time.Duration(200+rand.IntN(1300)) * time.Millisecond); time.Now().Before(stop); {
			send()
			time.Sleep(time.Duration(rand.IntN(40)) * time.Millisecond)
		}
		if k%2 == 0 {
			time.Sleep(time.Duration(rand.IntN(60)) * time.Millisecond)
		} else {
			// Timed to an answer, as a test that kills once it sees data
			// land: with the queue sent out (no answer for 200 ms), one
			// more request, and the kill 0 to 500 µs after CloudWatch
			// answered it, before anything else is sent.
			await(t, 10*time.Second, "the queue sent out", func() (bool, string) {
				return time.Since(time.Unix(0, lastAnswer.Load())) > 200*time.Millisecond, ""
			})
			select {
			case <-answered:
			default:
			}
			send()
			select {
			case <-answered:
			case <-time.After(10 * time.Second):
			}
			// Spun, not slept: the window is well under a sleep's accuracy.
			for until := time.Now().Add(time.Duration(rand.IntN(500)) * time.Microsecond); time.Now().Before(until); {
			}
		}
		killedAt[k] = time.Now()
		runs[k].kill9()
	}
	col := e.startCollectorOn(bin, e.config)
	runs = append(runs, col)
	count := func() (landed, want int) {
		storedMu.Lock()
		defer storedMu.Unlock()
		for stamp, ok := range acked {
			if ok {
				want++
				if len(stored[stamp]) > 0 {
					landed++
				}
			}
		}
		return landed, want
	}
	ok := await(t, scenarioDeadline, "every acknowledged request landed", func() (bool, string) {
		landed, want := count()
		return landed == want, fmt.Sprintf("%d of %d", landed, want)
	})
	// No condition tells that nothing more will land: what the last start
	// dispatches again goes behind what its queue held, and is sent within
	// moments of it.
	time.Sleep(3 * time.Second)
	col.stop()
	landed, want := count()
	require.True(t, ok, "acknowledged requests lost: %d of %d landed", landed, want)

	// Each datum stored twice: the kill it is due to, and whether
	// CloudWatch had stored it (answered) before that kill.
	storedMu.Lock()
	defer storedMu.Unlock()
	perKill := make([]int, kills)
	var afterAnswer, inFlight, timedHits int
	var sinceAnswer []time.Duration
	for _, at := range stored {
		if len(at) < 2 {
			continue
		}
		// The kill nearest the first storing is the one it fell in the
		// window of (a request dispatched again may wait in the queue
		// through a later run, killed before it was sent).
		k := sort.Search(kills, func(i int) bool { return killedAt[i].After(at[0]) })
		if k == kills || (k > 0 && at[0].Sub(killedAt[k-1]) < killedAt[k].Sub(at[0])) {
			k--
		}
		if k < 0 || !killedAt[k].Before(at[1]) {
			t.Errorf("a datum stored twice in one run (%v, %v)", at[0], at[1])
			continue
		}
		perKill[k] += len(at) - 1
		if at[0].Before(killedAt[k]) {
			afterAnswer++
			sinceAnswer = append(sinceAnswer, killedAt[k].Sub(at[0]).Round(10*time.Microsecond))
			if k%2 == 1 {
				timedHits++
			}
		} else {
			inFlight++
		}
	}
	for k, n := range perKill {
		assert.LessOrEqual(t, n, resendBoundPerKill, "kill %d sent %d datums twice", k, n)
	}
	for i, r := range runs {
		for _, line := range strings.Split(r.Output.String(), "\n") {
			if strings.Contains(line, "not sent again") || strings.Contains(line, "\twarn\t") || strings.Contains(line, "\terror\t") {
				t.Logf("run %d: %s", i, line)
			}
		}
	}
	t.Logf("%s: %d kills (every other one 0 to 500 µs after an answer), %d requests sent (%d acknowledged); datums sent twice per kill %v: %d answered before the kill (%d of them by a kill timed to an answer; kill that long after the answer: %v), %d on their way at the kill",
		bin, kills, next, want, perKill, afterAnswer, timedHits, sinceAnswer, inFlight)
}

// probeRequest is an OTLP/protobuf request of one gauge point at ts.
func probeRequest(t *testing.T, ts time.Time) []byte {
	t.Helper()
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "kill-probe")
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("kill.probe")
	dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
	dp.SetTimestamp(pcommon.NewTimestampFromTime(ts))
	dp.SetDoubleValue(1)
	b, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
	require.NoError(t, err)
	return b
}
