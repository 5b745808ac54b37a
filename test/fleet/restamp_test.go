// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"context"
	"fmt"
	"math/rand"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
)

// restampKills is how many times the sidecar is killed.
const restampKills = 20

// TestSidecarKillsAtRandomInstantsRestampWindow measures the one window in
// which a sidecar's restart re-sends under a new instance id: a kill -9
// between its queue taking a batch and the temporality state's record of
// that batch repeats the batch's conversion after the restart, and no
// gateway knows the result as a repeat. A service sends a cumulative
// counter as fast as the sidecar answers (one increment per request), the
// sidecar is killed at a random instant, restarted on its directory, and
// what landed is compared with the counter after each kill: never less
// (nothing lost), at most one request's increment more (one batch), and
// the kills that doubled are counted.
func TestSidecarKillsAtRandomInstantsRestampWindow(t *testing.T) {
	cw, err := cloudwatchtest.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = cw.Close() })
	const interval = time.Second
	gw := newNode(t, gatewayConfig, gatewayEnv(cw, interval)...)
	gw.start()
	httpPort := binarytest.FreePort(t)
	sc := newNode(t, sidecarConfig, append(sidecarEnv(gw), fmt.Sprintf("GPUBUILD_OTLP_HTTP_PORT=%d", httpPort))...)

	exp, err := otlpmetrichttp.New(context.Background(),
		otlpmetrichttp.WithEndpoint(fmt.Sprintf("127.0.0.1:%d", httpPort)), otlpmetrichttp.WithInsecure(),
		otlpmetrichttp.WithRetry(otlpmetrichttp.RetryConfig{Enabled: false}), otlpmetrichttp.WithTimeout(5*time.Second))
	require.NoError(t, err)
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithResource(
		resource.NewSchemaless(attribute.String("service.name", "vector-index-build"), attribute.String("service.instance.id", "worker-00"))))
	t.Cleanup(func() { _ = provider.Shutdown(context.Background()) })
	counter, err := provider.Meter("buildsvc").Int64Counter("buildsvc.vectors.moved")
	require.NoError(t, err)
	var total atomic.Int64
	send := func() error {
		counter.Add(context.Background(), 1)
		total.Add(1)
		rm := &metricdata.ResourceMetrics{}
		if err := reader.Collect(context.Background(), rm); err != nil {
			return err
		}
		return exp.Export(context.Background(), rm)
	}
	got := func() float64 {
		v, _ := landed(cw.Datums(), "buildsvc.vectors.moved", map[string]string{"service.name": "vector-index-build"})
		return v
	}

	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewSource(seed))
	var doubled, sent int
	var sending time.Duration
	excess := 0.0
	for k := range restampKills {
		sc.pickPorts()
		sc.start()
		stop, done := make(chan struct{}), make(chan int)
		go func() {
			n := 0
			for {
				select {
				case <-stop:
					done <- n
					return
				default:
				}
				if send() == nil {
					n++
				}
			}
		}()
		// A random instant while requests flow.
		d := time.Duration(300+rng.Intn(1200)) * time.Millisecond
		time.Sleep(d)
		sc.Kill9()
		close(stop)
		sent += <-done
		sending += d

		// Restarted on its directory, the sidecar sends its queue and the
		// counter's total; everything lands, then nothing more.
		sc.pickPorts()
		sc.start()
		require.NoError(t, send())
		want := float64(total.Load())
		require.True(t, binarytest.Eventually(60*time.Second, func() bool { return got() >= want+excess }),
			"kill %d: landed %v, want at least %v: nothing lost", k, got(), want+excess)
		require.False(t, binarytest.Eventually(4*interval, func() bool { return got() > want+excess+1 }))
		extra := got() - want - excess
		assert.LessOrEqual(t, extra, 1.0, "kill %d: at most the batch in the window", k)
		if extra > 0 {
			doubled++
			excess += extra
		}
		_, err := sc.Stop(30 * time.Second)
		require.NoError(t, err)
	}
	rate := float64(sent) / sending.Seconds()
	t.Logf("seed %d: %d kills at random instants, %d requests in %v (%.0f requests/s): %d kills doubled a request (%.0f counted twice)",
		seed, restampKills, sent, sending.Round(time.Millisecond), rate, doubled, excess)
	// A kill lands in some request's window with probability width x rate.
	t.Logf("window: about %.0f µs per request (%d of %d kills at %.0f requests/s); with none, under %.0f µs (95%%: 3 / (kills x rate))",
		float64(doubled)/float64(restampKills)/rate*1e6, doubled, restampKills, rate, 3/(float64(restampKills)*rate)*1e6)
}
