// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/gpubuild/otelcol-gpubuild/internal/requestid"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
)

// TestLastHopKillDuringPutMetricData measures the last hop's window: a
// gateway killed while a PutMetricData call is open (CloudWatch stored the
// datums and has not answered) still has that batch in its queue, and its
// next start sends it again. The duplicate is exactly the batch in flight,
// once: every series of the interval lands twice, nothing else does.
func TestLastHopKillDuringPutMetricData(t *testing.T) {
	const workers, series = 20, 16
	cw, err := cloudwatchtest.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = cw.Close() })
	const answerDelay = 5 * time.Second
	cw.SetFaults(cloudwatchtest.Faults{AnswerDelay: answerDelay})
	gw := newNode(t, "otelcol-gateway.yaml", gatewayEnv(cw, time.Second)...)
	gw.start()
	// The kill comes while CloudWatch holds the first call: its datums are
	// stored and its answer not sent.
	killed := make(chan struct{})
	var once sync.Once
	cw.OnAccept(func([]cloudwatchtest.Datum) {
		once.Do(func() {
			gw.Kill9()
			close(killed)
		})
	})

	conn, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", gw.grpc), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	client := pmetricotlp.NewGRPCClient(conn)
	for w := range workers {
		md := workerMetrics(w, series, 0)
		requestid.Stamp(md, requestid.ID{Instance: fmt.Sprintf("%032x", w), Sequence: 1})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := client.Export(ctx, pmetricotlp.NewExportRequestFromMetrics(md))
		cancel()
		require.NoError(t, err)
	}
	// Each worker's counter series adds 1: the merged series lands workers.
	want := map[string]float64{}
	for i := range series {
		want[fmt.Sprintf("stage-%d/engine-%d", i%8, i/8)] += workers
	}
	runs := func() map[string]float64 {
		got := map[string]float64{}
		for _, d := range cw.Datums() {
			if d.MetricName == "build.stage.runs" && d.Value != nil {
				got[d.Dimensions["build.stage"]+"/"+d.Dimensions["build.engine"]] += *d.Value
			}
		}
		return got
	}

	// The call is open: its datums are stored, its answer is on the way.
	select {
	case <-killed:
	case <-time.After(30 * time.Second):
		t.Fatal("the interval is not sent")
	}
	atKill, inFlight := runs(), len(cw.Datums())
	require.NotEmpty(t, atKill)

	// What was in flight lands again; what was not sent yet (a second
	// interval, if the requests straddled a boundary) lands once.
	final := map[string]float64{}
	for k, v := range want {
		final[k] = v + atKill[k]
	}
	cw.SetFaults(cloudwatchtest.Faults{})
	gw.start()
	var got map[string]float64
	require.True(t, binarytest.Eventually(60*time.Second, func() bool {
		got = runs()
		return assert.ObjectsAreEqual(final, got)
	}), "the restarted gateway sends the unanswered batch again: got %v, want %v", got, final)
	_, err = gw.Stop(30 * time.Second)
	require.NoError(t, err)
	assert.Equal(t, final, runs(), "the batch in flight landed twice, once more and no more")
	t.Logf("a kill while CloudWatch held a PutMetricData call open: the call's %d datums landed again after the restart", inFlight)
}
