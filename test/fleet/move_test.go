// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package fleet

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/gpubuild/otelcol-gpubuild/internal/testing/binarytest"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
)

// A service's cumulative counter at 100 through gateway A; its sidecar
// restarted onto gateway B (a scale-up, a rolling update) while the service
// goes on; then 150. The sidecar sends deltas, its conversion state on
// disk, so 150 lands in all: before, gateways kept each worker's cumulative
// series and converted them there, and gateway B counted the series from
// its start again (250 landed). The same after a kill -9 of the sidecar.
func TestCumulativeSeriesMoveBetweenGateways(t *testing.T) {
	for _, kill := range []bool{false, true} {
		t.Run(map[bool]string{false: "SIGTERM", true: "kill -9"}[kill], func(t *testing.T) {
			cw, err := cloudwatchtest.Start("127.0.0.1:0")
			require.NoError(t, err)
			t.Cleanup(func() { _ = cw.Close() })
			a := newNode(t, "otelcol-gateway.yaml", gatewayEnv(cw, gatewayInterval)...)
			b := newNode(t, "otelcol-gateway.yaml", gatewayEnv(cw, gatewayInterval)...)
			a.start()
			b.start()

			sc := newNode(t, sidecarConfig, sidecarEnv(a)...)
			httpPort := binarytest.FreePort(t)
			sc.env = append(sc.env, fmt.Sprintf("GPUBUILD_OTLP_HTTP_PORT=%d", httpPort))
			sc.start()

			// The service: one cumulative counter, exported when the test says.
			exp, err := otlpmetrichttp.New(context.Background(),
				otlpmetrichttp.WithEndpoint(fmt.Sprintf("127.0.0.1:%d", httpPort)), otlpmetrichttp.WithInsecure())
			require.NoError(t, err)
			reader := sdkmetric.NewManualReader()
			provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithResource(
				resource.NewSchemaless(attribute.String("service.name", "vector-index-build"), attribute.String("service.instance.id", "worker-00"))))
			t.Cleanup(func() { _ = provider.Shutdown(context.Background()) })
			counter, err := provider.Meter("buildsvc").Int64Counter("buildsvc.vectors.moved")
			require.NoError(t, err)
			export := func() {
				t.Helper()
				rm := &metricdata.ResourceMetrics{}
				require.NoError(t, reader.Collect(context.Background(), rm))
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				require.NoError(t, exp.Export(ctx, rm))
			}
			awaitLanded := func(want float64) {
				t.Helper()
				var got float64
				ok := binarytest.Eventually(60*time.Second, func() bool {
					got, _ = landed(cw.Datums(), "buildsvc.vectors.moved", map[string]string{"service.name": "vector-index-build"})
					return got == want
				})
				require.True(t, ok, "landed %v, want %v", got, want)
			}

			counter.Add(context.Background(), 100)
			export()
			awaitLanded(100)

			if kill {
				sc.Kill9()
			} else {
				_, err := sc.Stop(60 * time.Second)
				require.NoError(t, err)
			}
			sc.env = append(sidecarEnv(b), fmt.Sprintf("GPUBUILD_OTLP_HTTP_PORT=%d", httpPort))
			sc.start()
			counter.Add(context.Background(), 50)
			export()
			awaitLanded(150)
			// Nothing more lands: two more gateway intervals.
			more := binarytest.Eventually(3*gatewayInterval, func() bool {
				got, _ := landed(cw.Datums(), "buildsvc.vectors.moved", map[string]string{"service.name": "vector-index-build"})
				return got != 150
			})
			require.False(t, more, "more than 150 landed after the move")
		})
	}
}
