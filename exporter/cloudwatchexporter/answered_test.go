// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/metadata"
)

// An item the persistent queue dispatches again after a kill -9 (its
// export had returned, the queue had not yet recorded it as done) packs
// into the requests CloudWatch already answered: they are not sent again.
// Without a persistent queue there is no record, and the same export is
// sent twice (what the record prevents is real).
func TestAnsweredRequestsAreNotSentAgainAfterARestart(t *testing.T) {
	for name, persistent := range map[string]bool{"persistent queue": true, "memory queue": false} {
		t.Run(name, func(t *testing.T) {
			server := startServer(t)
			d := newDisk()
			storageID := component.MustNewID("file_storage")
			start := func() *metricsExporter {
				cfg := testConfig()
				cfg.Region = "eu-west-1"
				cfg.Endpoint = server.Endpoint()
				if persistent {
					cfg.QueueConfig.Get().StorageID = &storageID
				}
				cfg.ShutdownDrainTimeout = 0
				require.NoError(t, cfg.Validate())
				host := storageHost{Host: componenttest.NewNopHost(), extensions: map[component.ID]component.Component{
					storageID: &diskStorage{disk: d},
				}}
				set := exporterSettings()
				set.ID = component.NewID(metadata.Type) // the same in both processes
				exp, err := NewFactory().CreateMetrics(context.Background(), set, cfg)
				require.NoError(t, err)
				require.NoError(t, exp.Start(context.Background(), host))
				return exp.(*metricsExporter)
			}
			ts := pcommon.NewTimestampFromTime(time.Now().Add(-time.Minute))
			md := deltaBatch(2500, ts, 1) // three requests of at most 1000 datums

			first := start()
			require.NoError(t, first.pushMetrics(context.Background(), md))
			require.Equal(t, 2500, len(server.Datums()))
			requests := len(server.Requests())
			// The kill: the second process reads what the first left on the disk.
			second := start()
			require.NoError(t, second.pushMetrics(context.Background(), md))
			if persistent {
				assert.Equal(t, 2500, len(server.Datums()), "answered requests sent again")
				assert.Equal(t, requests, len(server.Requests()))
				// Other data is sent as usual.
				require.NoError(t, second.pushMetrics(context.Background(), deltaBatch(10, ts+1, 1)))
				assert.Equal(t, 2510, len(server.Datums()))
				// Once the queue was empty, what was dispatched again is
				// sent: the same data again is new data.
				select {
				case <-second.answeredDone:
				case <-time.After(10 * time.Second):
					t.Fatal("the record of the previous process was not forgotten with the queue empty")
				}
				require.NoError(t, second.pushMetrics(context.Background(), md))
				assert.Equal(t, 5010, len(server.Datums()))
			} else {
				assert.Equal(t, 5000, len(server.Datums()))
			}
			require.NoError(t, first.Shutdown(context.Background()))
			require.NoError(t, second.Shutdown(context.Background()))
		})
	}
}

// A request CloudWatch did not answer with success is not recorded: sent
// again, it goes out.
func TestFailedRequestsAreNotRecordedAsAnswered(t *testing.T) {
	server := startServer(t)
	d := newDisk()
	storageID := component.MustNewID("file_storage")
	cfg := testConfig()
	cfg.Region = "eu-west-1"
	cfg.Endpoint = server.Endpoint()
	cfg.QueueConfig.Get().StorageID = &storageID
	cfg.ShutdownDrainTimeout = 0
	host := storageHost{Host: componenttest.NewNopHost(), extensions: map[component.ID]component.Component{
		storageID: &diskStorage{disk: d},
	}}
	exp, err := NewFactory().CreateMetrics(context.Background(), exporterSettings(), cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), host))
	m := exp.(*metricsExporter)
	md := deltaBatch(10, pcommon.NewTimestampFromTime(time.Now().Add(-time.Minute)), 1)
	require.NoError(t, server.SetDown(true))
	require.Error(t, m.pushMetrics(context.Background(), md))
	require.NoError(t, server.SetDown(false))
	require.NoError(t, m.pushMetrics(context.Background(), md))
	assert.Equal(t, 10, len(server.Datums()))
	assert.Len(t, d.keys("/"+answeredStorageName+"/"), 1, "one answered request recorded")
	require.NoError(t, m.Shutdown(context.Background()))
}

// Requests of one process identical to one it sent (the same data sent
// twice on purpose) are all sent: only a previous process's answers are
// looked up.
func TestIdenticalRequestsOfOneProcessAreAllSent(t *testing.T) {
	server := startServer(t)
	storageID := component.MustNewID("file_storage")
	cfg := testConfig()
	cfg.Region = "eu-west-1"
	cfg.Endpoint = server.Endpoint()
	cfg.QueueConfig.Get().StorageID = &storageID
	cfg.ShutdownDrainTimeout = 0
	host := storageHost{Host: componenttest.NewNopHost(), extensions: map[component.ID]component.Component{
		storageID: &diskStorage{disk: newDisk()},
	}}
	exp, err := NewFactory().CreateMetrics(context.Background(), exporterSettings(), cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), host))
	m := exp.(*metricsExporter)
	md := deltaBatch(10, pcommon.NewTimestampFromTime(time.Now().Add(-time.Minute)), 1)
	for range 3 {
		require.NoError(t, m.pushMetrics(context.Background(), md))
	}
	assert.Equal(t, 30, len(server.Datums()))
	require.NoError(t, m.Shutdown(context.Background()))
}
