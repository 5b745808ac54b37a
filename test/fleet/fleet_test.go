// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/buildsim"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
)

const (
	sidecars        = 20
	gatewayInterval = 3 * time.Second
)

// TestFleetThroughGateways: 20 sidecars, each with its own build service
// workload, send through two gateways; mid-run one gateway is killed with
// SIGKILL while its open interval holds acknowledged requests, and one
// sidecar is killed with SIGKILL while it sends; both restart on their
// directories. Every series lands exactly once, and the gateways send about
// ceil(series/1000) requests per flush instead of one per sidecar.
func TestFleetThroughGateways(t *testing.T) {
	cw, err := cloudwatchtest.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = cw.Close() })
	var (
		mu            sync.Mutex
		requests      int
		maxPerRequest int
	)
	cw.OnAccept(func(d []cloudwatchtest.Datum) {
		mu.Lock()
		defer mu.Unlock()
		requests++
		maxPerRequest = max(maxPerRequest, len(d))
	})

	gateways := make([]*node, 2)
	for i := range gateways {
		gateways[i] = newNode(t, "otelcol-gateway.yaml", gatewayEnv(cw, gatewayInterval)...)
		gateways[i].start()
	}
	nodes := make([]*node, sidecars)
	for i := range nodes {
		nodes[i] = newNode(t, sidecarConfig, sidecarEnv(gateways[i%len(gateways)])...)
		nodes[i].start()
	}

	// Every worker runs its own workload against its own sidecar.
	summaries := make([]*buildsim.Summary, sidecars)
	errs := make([]error, sidecars)
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			summaries[i], errs[i] = buildsim.Run(ctx, workload(nodes[i], i))
		}()
	}

	// Mid-run: once data flows through both gateways, kill one without
	// warning and start it again on the same port and queue directory.
	require.True(t, binarytest.Eventually(90*time.Second, func() bool {
		return gateways[0].flushes() >= 2 && gateways[1].flushes() >= 2
	}), "both gateways flushed data")
	// Kill it while its open interval holds requests it acknowledged: they
	// are in its journal, and its next start hands them on.
	var held float64
	require.True(t, binarytest.Eventually(30*time.Second, func() bool {
		held = gateways[1].pointsHeld()
		return held >= 10
	}), "gateway 1 holds acknowledged points")
	killedFlushes := gateways[1].flushes()
	killedDuplicates := gateways[1].duplicates()
	gateways[1].Kill9()
	t.Logf("gateway 1 killed with SIGKILL after %v flushes, its open interval holding %v acknowledged points", killedFlushes, held)
	gateways[1].start()

	// A sidecar killed while it sends (its flushes every second): what its
	// queue held is sent again by its next start, with the same identities.
	victim := nodes[3]
	require.True(t, binarytest.Eventually(30*time.Second, func() bool {
		return victim.telemetryValue("otelcol_exporter_sent_metric_points") > 0
	}), "sidecar 3 sends")
	victim.Kill9()
	victim.start()

	wg.Wait()
	tr := truth{}
	for i, s := range summaries {
		require.NoError(t, errs[i], "worker %d", i)
		require.Equal(t, s.Generated, s.Acknowledged, "worker %d: its sidecar acknowledged everything", i)
		tr.addService(s.Generated)
	}
	require.NotEmpty(t, tr)

	// Everything lands: the sidecars' queues retried what the killed
	// gateway had not acknowledged.
	var last []string
	ok := binarytest.Eventually(120*time.Second, func() bool {
		last = tr.mismatches(cw.Datums())
		return len(last) == 0
	})
	require.True(t, ok, "%d series differ from the truth, e.g.\n%v", len(last), head(last, 20))

	// Nothing more lands after an orderly stop of everything: no double count.
	for _, n := range nodes {
		_, err := n.Stop(30 * time.Second)
		assert.NoError(t, err)
	}
	flushes, duplicates := killedFlushes, killedDuplicates
	for _, g := range gateways {
		flushes += g.flushes()
		duplicates += g.duplicates()
		_, err := g.Stop(30 * time.Second)
		assert.NoError(t, err)
	}
	datums := cw.Datums()
	assert.Empty(t, tr.mismatches(datums), "after every process stopped")

	// Requests per flush: ceil(series/1000) per gateway flush, not one per sidecar.
	distinct := map[string]bool{}
	for _, d := range datums {
		distinct[d.MetricName+"{"+dimKey(d.Dimensions)+"}"] = true
	}
	mu.Lock()
	reqs, biggest := requests, maxPerRequest
	mu.Unlock()
	perFlush := math.Ceil(float64(len(distinct)) / 1000)
	t.Logf("requests merged once although sent again: %v", duplicates)
	t.Logf("%d sidecars, 2 gateways: %d distinct series, %d datums in %d PutMetricData requests over %v gateway flushes (%.2f requests per flush, want ~%v; largest request %d datums); series checked %d",
		sidecars, len(distinct), len(datums), reqs, flushes, float64(reqs)/flushes, perFlush, biggest, len(tr))
	require.Positive(t, flushes)
	assert.LessOrEqual(t, float64(reqs), math.Ceil(1.1*perFlush*flushes), "requests per flush within 10%% of ceil(series/1000)")
	assert.Less(t, float64(reqs), float64(sidecars)*flushes/2, "far fewer requests than one per sidecar per flush")
}

func head(s []string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return fmt.Sprint(s)
}
