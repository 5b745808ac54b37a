package cloudwatchexporter

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/gpubuild/otelcol-gpubuild/exporter/cloudwatchexporter/internal/metadatatest"
	"github.com/gpubuild/otelcol-gpubuild/internal/cloudwatchtest"
)

// disk stands for the files a file_storage extension keeps across restarts.
type disk struct {
	mu   sync.Mutex
	data map[string][]byte
}

// diskStorage is a storage extension over a disk; a new one over the same
// disk is what a collector restart sees.
type diskStorage struct {
	component.StartFunc
	component.ShutdownFunc
	disk *disk
}

func (s *diskStorage) GetClient(_ context.Context, kind component.Kind, id component.ID, name string) (storage.Client, error) {
	return &diskClient{disk: s.disk, prefix: kind.String() + "/" + id.String() + "/" + name + "/"}, nil
}

type diskClient struct {
	disk   *disk
	prefix string
}

func (c *diskClient) Get(_ context.Context, key string) ([]byte, error) {
	c.disk.mu.Lock()
	defer c.disk.mu.Unlock()
	return c.disk.data[c.prefix+key], nil
}

func (c *diskClient) Set(_ context.Context, key string, value []byte) error {
	c.disk.mu.Lock()
	defer c.disk.mu.Unlock()
	c.disk.data[c.prefix+key] = append([]byte(nil), value...)
	return nil
}

func (c *diskClient) Delete(_ context.Context, key string) error {
	c.disk.mu.Lock()
	defer c.disk.mu.Unlock()
	delete(c.disk.data, c.prefix+key)
	return nil
}

func (c *diskClient) Batch(ctx context.Context, ops ...*storage.Operation) error {
	for _, op := range ops {
		var err error
		switch op.Type {
		case storage.Get:
			op.Value, err = c.Get(ctx, op.Key)
		case storage.Set:
			err = c.Set(ctx, op.Key, op.Value)
		case storage.Delete:
			err = c.Delete(ctx, op.Key)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (c *diskClient) Close(context.Context) error { return nil }

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
	d := &disk{data: map[string][]byte{}}

	cfg := testConfig()
	cfg.Region = "eu-west-1"
	cfg.Endpoint = server.Endpoint()
	cfg.BackOffConfig.InitialInterval = 5 * time.Millisecond
	cfg.BackOffConfig.MaxInterval = 20 * time.Millisecond
	cfg.QueueConfig.Get().StorageID = &storageID
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
