// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchexporter

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/metadata"
	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/metadatatest"
	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/queuecompress"
	"github.com/gpubuild/otelcol-gpubuild/internal/testing/cloudwatchtest"
)

// disk stands for the files a file_storage extension keeps across restarts.
type disk struct {
	mu   sync.Mutex
	data map[string][]byte
	// Injected failures, and how many batches were written.
	getErr, batchErr error
	batches          int
}

func newDisk() *disk { return &disk{data: map[string][]byte{}} }

// keys lists the stored keys that contain part, sorted.
func (d *disk) keys(part string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var keys []string
	for k := range d.data {
		if strings.Contains(k, part) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// diskStorage is a storage extension over a disk; a new one over the same
// disk is what a collector restart sees. walk: its clients can list their
// entries (storage.Walker), as file_storage's can.
type diskStorage struct {
	component.StartFunc
	component.ShutdownFunc
	disk *disk
	walk bool
}

func (s *diskStorage) GetClient(_ context.Context, kind component.Kind, id component.ID, name string) (storage.Client, error) {
	c := &diskClient{disk: s.disk, prefix: kind.String() + "/" + id.String() + "/" + name + "/"}
	if s.walk {
		return walkingClient{c}, nil
	}
	return c, nil
}

type diskClient struct {
	disk   *disk
	prefix string
}

func (c *diskClient) Get(_ context.Context, key string) ([]byte, error) {
	c.disk.mu.Lock()
	defer c.disk.mu.Unlock()
	if c.disk.getErr != nil {
		return nil, c.disk.getErr
	}
	return c.disk.data[c.prefix+key], nil
}

func (c *diskClient) Set(ctx context.Context, key string, value []byte) error {
	return c.Batch(ctx, storage.SetOperation(key, value))
}

func (c *diskClient) Delete(ctx context.Context, key string) error {
	return c.Batch(ctx, storage.DeleteOperation(key))
}

// Batch applies all of ops or, on an injected failure, none.
func (c *diskClient) Batch(_ context.Context, ops ...*storage.Operation) error {
	c.disk.mu.Lock()
	defer c.disk.mu.Unlock()
	if c.disk.batchErr != nil {
		return c.disk.batchErr
	}
	c.disk.batches++
	for _, op := range ops {
		switch op.Type {
		case storage.Get:
			op.Value = c.disk.data[c.prefix+op.Key]
		case storage.Set:
			c.disk.data[c.prefix+op.Key] = append([]byte(nil), op.Value...)
		case storage.Delete:
			delete(c.disk.data, c.prefix+op.Key)
		}
	}
	return nil
}

func (c *diskClient) Close(context.Context) error { return nil }

// walkingClient is a diskClient that can list its entries.
type walkingClient struct{ *diskClient }

func (c walkingClient) Walk(ctx context.Context, fn storage.WalkFunc) error {
	var ops []*storage.Operation
	for _, k := range c.disk.keys(c.prefix) {
		c.disk.mu.Lock()
		v := c.disk.data[k]
		c.disk.mu.Unlock()
		more, err := fn(strings.TrimPrefix(k, c.prefix), v)
		ops = append(ops, more...)
		if errors.Is(err, storage.SkipAll) {
			break
		}
		if err != nil {
			return err
		}
	}
	if len(ops) == 0 {
		return nil
	}
	return c.Batch(ctx, ops...)
}

type storageHost struct {
	component.Host
	extensions map[component.ID]component.Component
}

func (h storageHost) GetExtensions() map[component.ID]component.Component { return h.extensions }

func TestPersistentQueueSurvivesARestart(t *testing.T) {
	isolateAWS(t)
	server, err := cloudwatchtest.Start("127.0.0.1:0")
	require.NoError(t, err)
	defer server.Close()
	storageID := component.MustNewID("file_storage")
	d := newDisk()

	cfg := testConfig()
	cfg.Region = "eu-west-1"
	cfg.Endpoint = server.Endpoint()
	cfg.BackOffConfig.InitialInterval = 5 * time.Millisecond
	cfg.BackOffConfig.MaxInterval = 20 * time.Millisecond
	cfg.QueueConfig.Get().StorageID = &storageID
	// Shutdown leaves the queue on disk at once, as at a kill or when the
	// drain gives up (TestShutdownDrainGivesUpAtTheTimeout).
	cfg.ShutdownDrainTimeout = 0
	require.NoError(t, cfg.Validate())

	start := func() *metricsExporter {
		host := storageHost{Host: componenttest.NewNopHost(), extensions: map[component.ID]component.Component{
			storageID: &diskStorage{disk: d},
		}}
		tt := componenttest.NewTelemetry()
		t.Cleanup(func() { _ = tt.Shutdown(context.Background()) })
		exp, err := NewFactory().CreateMetrics(context.Background(), metadatatest.NewSettings(tt), cfg)
		require.NoError(t, err)
		require.NoError(t, exp.Start(context.Background(), host))
		return exp.(*metricsExporter)
	}

	// CloudWatch is unreachable while two exports of a cumulative counter
	// are queued; then the collector stops.
	require.NoError(t, server.SetDown(true))
	first := start()
	begin := pcommon.NewTimestampFromTime(time.Now().Add(-10 * time.Minute))
	for i, v := range []int64{40, 100} {
		md := cumulativeSum(begin, pcommon.NewTimestampFromTime(time.Now().Add(time.Duration(i)*time.Second)), v, nil)
		require.NoError(t, first.ConsumeMetrics(context.Background(), md))
	}
	time.Sleep(50 * time.Millisecond) // let the consumers try and fail
	require.NoError(t, first.Shutdown(context.Background()))
	assert.Empty(t, server.Datums())

	// CloudWatch is back and the collector restarts: the queued deltas are
	// sent, exactly (40 since start, then 60).
	require.NoError(t, server.SetDown(false))
	second := start()
	require.Eventually(t, func() bool { return len(server.Datums()) >= 2 }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, second.Shutdown(context.Background()))
	var values []float64
	for _, dd := range server.Datums() {
		values = append(values, *dd.Value)
	}
	assert.ElementsMatch(t, []float64{40, 60}, values)
}

// Requests queued by a release that stored them uncompressed are sent by
// this one: the same queue file, each request rewritten as it was stored
// before compression.
func TestRequestsQueuedUncompressedAreSentAfterAnUpgrade(t *testing.T) {
	server := startServer(t)
	require.NoError(t, server.SetDown(true))
	dir := t.TempDir()
	noDrain := func(cfg *Config) { cfg.ShutdownDrainTimeout = 0 }
	before := startQueuedExporter(t, server, dir, noDrain)
	const batches, series = 3, 200
	consumeBatches(t, before.testExporter, batches, series)
	before.stop(t)

	ctx := context.Background()
	ext := newFileStorage(t, dir).(storage.Extension)
	client, err := ext.GetClient(ctx, component.KindExporter, component.NewID(metadata.Type), queueClientName)
	require.NoError(t, err)
	rewritten := 0
	require.NoError(t, client.(storage.Walker).Walk(ctx, func(key string, value []byte) ([]*storage.Operation, error) {
		if !queuecompress.Compressed(value) {
			return nil, nil
		}
		raw, err := queuecompress.Decode(value)
		if err != nil {
			return nil, err
		}
		rewritten++
		return []*storage.Operation{storage.SetOperation(key, raw)}, nil
	}))
	require.NoError(t, client.Close(ctx))
	require.NoError(t, ext.Shutdown(ctx))
	require.Equal(t, batches, rewritten)

	require.NoError(t, server.SetDown(false))
	after := startQueuedExporter(t, server, dir, noDrain)
	require.Eventually(t, func() bool { return len(server.Datums()) >= batches*series }, 10*time.Second, 10*time.Millisecond)
	after.stop(t)
	assertExactlyOnce(t, server.Datums(), batches*series, batches*series)
}
