// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package answered

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// mapClient is a storage client over a map that outlives it (a disk).
type mapClient struct {
	mu   *sync.Mutex
	data map[string][]byte
}

func newMapClient() mapClient { return mapClient{mu: &sync.Mutex{}, data: map[string][]byte{}} }

func (c mapClient) Get(_ context.Context, k string) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.data[k], nil
}

func (c mapClient) Set(ctx context.Context, k string, v []byte) error {
	return c.Batch(ctx, storage.SetOperation(k, v))
}

func (c mapClient) Delete(ctx context.Context, k string) error {
	return c.Batch(ctx, storage.DeleteOperation(k))
}

func (c mapClient) Batch(_ context.Context, ops ...*storage.Operation) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, op := range ops {
		switch op.Type {
		case storage.Get:
			op.Value = c.data[op.Key]
		case storage.Set:
			c.data[op.Key] = append([]byte(nil), op.Value...)
		case storage.Delete:
			delete(c.data, op.Key)
		}
	}
	return nil
}

func (mapClient) Close(context.Context) error { return nil }

func TestRecordKeepsTheLastSizeAnswersAcrossReopens(t *testing.T) {
	ctx := context.Background()
	disk := newMapClient()
	const size = 8
	r, n, err := Open(ctx, disk, size)
	require.NoError(t, err)
	assert.Zero(t, n)
	for h := uint64(1); h <= size+3; h++ {
		require.NoError(t, r.Add(ctx, h))
	}

	r2, n, err := Open(ctx, disk, size)
	require.NoError(t, err)
	assert.Equal(t, size, n)
	for h := uint64(1); h <= 3; h++ {
		assert.False(t, r2.Answered(h), "%d fell out of the ring", h)
	}
	for h := uint64(4); h <= size+3; h++ {
		assert.True(t, r2.Answered(h), "%d", h)
	}
	assert.False(t, r2.Answered(100))

	// The next process goes on where this one stopped: its first answer
	// replaces the oldest (4), not a newer one.
	require.NoError(t, r2.Add(ctx, 100))
	r3, _, err := Open(ctx, disk, size)
	require.NoError(t, err)
	assert.False(t, r3.Answered(4))
	for h := uint64(5); h <= size+3; h++ {
		assert.True(t, r3.Answered(h), "%d", h)
	}
	assert.True(t, r3.Answered(100))
}

// A process's own answers are not looked up: a request identical to one it
// sent is new data, sent again on purpose. Forget ends the look-ups of the
// previous process's answers.
func TestOnlyPreviousAnswersAreLookedUpUntilForgotten(t *testing.T) {
	ctx := context.Background()
	disk := newMapClient()
	r, _, err := Open(ctx, disk, 8)
	require.NoError(t, err)
	require.NoError(t, r.Add(ctx, 1))
	assert.False(t, r.Answered(1), "this process's own answer")

	r2, _, err := Open(ctx, disk, 8)
	require.NoError(t, err)
	require.NoError(t, r2.Add(ctx, 2))
	assert.True(t, r2.Answered(1))
	assert.False(t, r2.Answered(2))
	r2.Forget()
	assert.False(t, r2.Answered(1))
}

func TestHashZeroIsRecorded(t *testing.T) {
	ctx := context.Background()
	disk := newMapClient()
	r, _, err := Open(ctx, disk, 4)
	require.NoError(t, err)
	require.NoError(t, r.Add(ctx, 0))
	r2, n, err := Open(ctx, disk, 4)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.True(t, r2.Answered(0))
}

func TestUnreadableSlotsAreEmpty(t *testing.T) {
	ctx := context.Background()
	disk := newMapClient()
	disk.data[slotKey(0)] = []byte("torn")
	r, n, err := Open(ctx, disk, 4)
	require.NoError(t, err)
	assert.Zero(t, n)
	require.NoError(t, r.Add(ctx, 7))
	r2, n, err := Open(ctx, disk, 4)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.True(t, r2.Answered(7))
}

const childEnv = "ANSWERED_TEST_CHILD_DIR"

// openFileStorage opens the record on a real file_storage in dir.
func openFileStorage(dir string) (extension.Extension, *Record, int, error) {
	f := filestorage.NewFactory()
	cfg := f.CreateDefaultConfig().(*filestorage.Config)
	cfg.Directory, cfg.Compaction.Directory = dir, dir
	ctx := context.Background()
	ext, err := f.Create(ctx, extension.Settings{
		ID: component.NewID(f.Type()), TelemetrySettings: componenttest.NewNopTelemetrySettings(),
		BuildInfo: component.NewDefaultBuildInfo(),
	}, cfg)
	if err != nil {
		return nil, nil, 0, err
	}
	if err = ext.Start(ctx, componenttest.NewNopHost()); err != nil {
		return nil, nil, 0, err
	}
	client, err := ext.(storage.Extension).GetClient(ctx, component.KindExporter, component.MustNewID("cloudwatch"), "answered")
	if err != nil {
		return nil, nil, 0, err
	}
	r, n, err := Open(ctx, client, Size)
	return ext, r, n, err
}

// The child process of TestEveryAnswerRecordedBeforeAKillIsRead: it records
// answers on the real file_storage and prints each hash once Add returned,
// until it is killed.
func TestMain(m *testing.M) {
	if dir := os.Getenv(childEnv); dir != "" {
		_, r, _, err := openFileStorage(dir)
		if err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
		start, _ := strconv.ParseUint(os.Getenv(childEnv+"_START"), 10, 64)
		for h := start; ; h++ {
			if err := r.Add(context.Background(), h); err != nil {
				fmt.Println("error", err)
				os.Exit(2)
			}
			fmt.Println(h)
		}
	}
	os.Exit(m.Run())
}

// A process killed with SIGKILL at random instants while it records
// answers: every answer whose Add had returned is in the record the next
// process reads (a kill may land inside the write, whose answer is then
// missing or present, never a damaged record).
func TestEveryAnswerRecordedBeforeAKillIsRead(t *testing.T) {
	dir := t.TempDir()
	next := uint64(1)
	var returned []uint64
	for kill := range 5 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+dir, childEnv+"_START="+strconv.FormatUint(next, 10))
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		lines := bufio.NewScanner(out)
		stopAt := 50 + rand.IntN(400)
		for i := 0; i < stopAt && lines.Scan(); i++ {
			h, err := strconv.ParseUint(lines.Text(), 10, 64)
			require.NoError(t, err, lines.Text())
			returned = append(returned, h)
			next = h + 1
		}
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()
		next += 1000 // the hashes printed after the scan stopped are not checked
		t.Logf("kill %d after %d answers", kill, stopAt)
	}
	ext, r, n, err := openFileStorage(dir)
	require.NoError(t, err)
	require.LessOrEqual(t, len(returned), Size, "the test stays within the ring")
	missing := 0
	for _, h := range returned {
		if !r.Answered(h) {
			missing++
		}
	}
	assert.Zero(t, missing, "answers recorded before a kill and not read after it (of %d; the record holds %d)", len(returned), n)
	require.NoError(t, r.Close(context.Background()))
	require.NoError(t, ext.Shutdown(context.Background()))
}
