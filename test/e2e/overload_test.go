// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/buildsim"
)

// burstTraces is an OTLP/protobuf request of about size bytes of plain
// spans (no build attributes: the connector only reads and drops them), so
// the burst costs the collector memory to decode without adding to what
// CloudWatch has to receive.
func burstTraces(t *testing.T, size int) []byte {
	t.Helper()
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "build-burst")
	ss := rs.ScopeSpans().AppendEmpty()
	now := pcommon.NewTimestampFromTime(time.Now())
	pad := strings.Repeat("p", 200)
	for i := 0; ; i++ {
		s := ss.Spans().AppendEmpty()
		s.SetName("GET /healthz")
		s.SetTraceID(pcommon.TraceID([16]byte{byte(i), byte(i >> 8), byte(i >> 16), 1}))
		s.SetSpanID(pcommon.SpanID([8]byte{byte(i), byte(i >> 8), byte(i >> 16), 2}))
		s.SetStartTimestamp(now)
		s.SetEndTimestamp(now + 1000)
		for k := range 8 {
			s.Attributes().PutStr(fmt.Sprintf("attr.%d", k), pad)
		}
		if i%256 == 0 {
			if sz := (&ptrace.ProtoMarshaler{}).TracesSize(td); sz >= size {
				break
			}
		}
	}
	b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	require.NoError(t, err)
	return b
}

// Scenario 8: a burst far above capacity, with a build service sending
// through it. What is guaranteed, whatever the machine's load: memory stays
// bounded (peak RSS under the sidecar's budget, the heap limit of the
// admission extension's memory check plus the margin stated below); every refusal is one an OTLP client
// retries (HTTP 503/429, gRPC UNAVAILABLE), never a dropped connection;
// and nothing acknowledged is lost: the service's data sent during the
// burst (its client retrying what was refused) and after it lands exactly.
// Whether the heap check refuses at all depends on how fast the burst
// arrives (a busy machine slows it down): the refusals are reported, not
// required.
func TestOverload(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the overload burst (about 15 s of both cores); run without -short, as `make test` does")
	}
	// The sidecar's memory budget (its container limit) is 256 MiB and
	// the heap limit (admission's memory.limit_mib) 200 MiB: the 56 MiB
	// margin is for what limit_mib does not bound, the binary and runtime
	// (about 50 MiB) and requests admitted before a reading of the heap
	// saw the ones before them. The spike allowance is sized for that: 8 concurrent 4.5 MiB
	// requests decode to about 100 MiB, so refusals start at 50 MiB of heap.
	const budgetMiB, limitMiB, spikeMiB = 256, 200, 150
	e := newEnv(t, func(c *sidecarConfig) {
		c.MemoryLimitMiB, c.MemorySpikeMiB = limitMiB, spikeMiB
		c.MaxRecvMiB = 8
	})
	payload := burstTraces(t, 4<<20)

	sampleMem := binarytest.SampleMem(e.col.Pid(), 10*time.Millisecond)

	// The service sends during the burst; its client retries refusals.
	type simResult struct {
		s   *buildsim.Summary
		err error
	}
	during := make(chan simResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		s, err := buildsim.Run(ctx, simConfig(e.cfg.ports, buildsim.ProtocolGRPC, "build-during-burst", 100), buildsim.WithLogf(t.Logf))
		during <- simResult{s, err}
	}()

	var mu sync.Mutex
	statuses := map[int]int{}
	const senders = 8
	deadline := time.Now().Add(6 * time.Second)
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 30 * time.Second}
	url := fmt.Sprintf("http://127.0.0.1:%d/v1/traces", e.cfg.HTTP)
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				code := -1
				resp, err := client.Post(url, "application/x-protobuf", bytes.NewReader(payload))
				if err == nil {
					code = resp.StatusCode
					resp.Body.Close()
				}
				mu.Lock()
				statuses[code]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	peakRSS := sampleMem().RSS
	_, hwm := e.col.rssKiB()
	r := <-during
	require.NoError(t, r.err, "the service sending during the burst")

	samples := e.scrape()
	refused, _ := samples.Sum("otelcol_admission_refused_requests", map[string]string{"reason": "memory"})
	t.Logf("burst of %d x %d KiB requests: statuses %v; the heap check refused %v requests; peak RSS sampled %d KiB, VmHWM %d KiB (limit_mib %d, budget %d MiB)",
		senders, len(payload)>>10, statuses, refused, peakRSS, hwm, limitMiB, budgetMiB)
	assert.Zero(t, statuses[-1], "connection errors: the collector must refuse, not fall over")
	for code, n := range statuses {
		assert.Contains(t, []int{http.StatusOK, http.StatusServiceUnavailable, http.StatusTooManyRequests}, code, "%d responses with status %d: not a refusal OTLP clients retry", n, code)
	}
	assert.Less(t, hwm, int64(budgetMiB)<<10, "peak RSS %d KiB over the %d MiB budget", hwm, budgetMiB)
	// The service's client retried every refusal (a refusal it does not
	// retry fails it for good) until all of it was acknowledged.
	requireAllAcknowledged(t, r.s)

	// Recovery: healthy again, and traffic after the burst arrives exactly.
	recoverStart := time.Now()
	require.True(t, binarytest.Eventually(20*time.Second, e.col.healthy), "not healthy after the burst")
	t.Logf("healthy %v after the burst", time.Since(recoverStart))
	s := runSim(t, simConfig(e.cfg.ports, buildsim.ProtocolGRPC, "build-after-burst", 101))
	e.waitJobs(60*time.Second, serviceDims(r.s), totalJobs(r.s.Generated))
	e.waitJobs(30*time.Second, serviceDims(s), totalJobs(s.Generated))
	time.Sleep(2 * e.cfg.FlushInterval)
	e.col.stop(30 * time.Second)
	datums := e.cw.Datums()
	// Nothing acknowledged lost, during the burst or after it.
	for _, sum := range []*buildsim.Summary{r.s, s} {
		checkDerived(t, datums, sum.Generated, serviceDims(sum), e.cfg.APIFromSpans)
		checkSDKMetrics(t, datums, sum.SDKMetrics, serviceDims(sum))
	}
}
